"""`gdx inject` and `gdx probe-files`: the probe in a stock engine pod, without rebuilding its image.

`tree` writes the files an init container copies (the probe's modules, a `.dist-info` that gives
vLLM its plugin entry point, a `sitecustomize.py` for SGLang and TensorRT-LLM); `podspec` adds that
init container, its volumes and the engine's environment to one pod spec; `manifests` finds the pod
specs in Kubernetes objects; `command` is the command line.
"""
