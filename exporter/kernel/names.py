"""Names the programs and the cluster share: the annotation prefix and its keys, the engines that can be
recognised and injected, vLLM's entry point name for the probe."""

from __future__ import annotations

ANNOTATION_PREFIX = "guided-decoding-exporter.io"
SCRAPE_ANNOTATION = f"{ANNOTATION_PREFIX}/scrape"  # "true": the daemon scrapes the pod's engine page
# names the engine container where it is not recognised
CONTAINER_ANNOTATION = f"{ANNOTATION_PREFIX}/container"
ENGINE_ANNOTATION = f"{ANNOTATION_PREFIX}/engine"  # the engine's kind where it is not vllm
PROBE_ANNOTATION = f"{ANNOTATION_PREFIX}/probe"  # "injected" on every pod `gdx inject` injected
PYTHONPATH_ANNOTATION = f"{ANNOTATION_PREFIX}/image-pythonpath"  # the image's own ENV PYTHONPATH
ENGINE_KINDS = ("vllm", "sglang", "trtllm")  # the serving engines recognised in a pod and injected
PLUGIN = "guided_decoding_probe"  # the vllm.general_plugins entry point's name (VLLM_PLUGINS lists it)
METRIC_PREFIX = "guided_decoding_"  # every family the daemon exports starts with it (docs/metrics.md)
DISTRIBUTION = "guided_decoding_exporter"  # the package's distribution name (the probe tree's .dist-info)
