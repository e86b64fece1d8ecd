"""`gdx inject` (Kubernetes YAML in, the same YAML with the probe added out) and `gdx probe-files`.

Like `linkerd inject`: files, folders or `-` (stdin); one document, many, or a `List`; every
document written back, followed by `---`; kinds without an engine pod template untouched; a template
already injected left as it is; the report on stderr after the YAML. An error writes no YAML and
exits 1, so `... | gdx inject - | kubectl apply -f -` applies nothing half-done; input that is no
manifest (not YAML, aliases past their bound, a field of the wrong type) exits 2, as a wrong flag.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from exporter import __version__
from exporter.inject.documents import load_documents
from exporter.inject.errors import InvalidManifest
from exporter.inject.manifests import InjectOutcome, inject_object
from exporter.inject.podspec import TRANSPORTS, InjectError, InjectOptions
from exporter.kernel.names import CONTAINER_ANNOTATION, ENGINE_KINDS
from exporter.wire import DEFAULT_AUDIENCE, DEFAULT_TCP_PORT

DEFAULT_IMAGE = f"guided-decoding-exporter:{__version__}"
SUFFIXES = (".yaml", ".yml", ".json")
CONFIGMAP_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")


def add_parsers(commands: Any) -> None:
    parser = commands.add_parser(
        "inject",
        help="add the probe to the engine containers of Kubernetes manifests (no image rebuild)",
        description=(
            "Read Kubernetes YAML (FILE, a folder of .yaml/.yml/.json files, or '-' for stdin; one document,"
            " many, or a List) and write it to stdout with the guided-decoding probe added to every"
            " Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob, Pod, LeaderWorkerSet and KServe"
            " InferenceService whose engine container it finds: by --container, the pod annotation"
            f" {CONTAINER_ANNOTATION}, or a command line / image of vLLM, SGLang or"
            " TensorRT-LLM. An init container copies the probe from the exporter image into an emptyDir;"
            " the engine gets it first on PYTHONPATH (a literal PYTHONPATH is kept after it), the daemon's"
            " address, its pod name and namespace, and, for the TCP transports, a projected token. Other"
            " kinds and templates already injected are written back unchanged. The report goes to stderr."
            " Exit 0: written; 1: an error (nothing written); 2: an invalid flag, or input that is no"
            " manifest: not YAML, aliases repeating more than 100,000 nodes, a field of the wrong type"
            " (nothing written)."
        ),
    )
    parser.add_argument("files", nargs="*", default=["-"], metavar="FILE", help="default: stdin")
    parser.add_argument(
        "--transport",
        choices=TRANSPORTS,
        default="service",
        help="how the probe reaches its node's daemon: service (default; a Service with internalTrafficPolicy"
        " Local, no hostPort, no hostPath), hostip (the node's IP from the downward API, the daemon on a"
        " hostPort), socket (the hostPath unix socket: the engine's namespace must be privileged)",
    )
    parser.add_argument(
        "--engine",
        choices=ENGINE_KINDS,
        default="",
        help="the engine kind (default: recognised)",
    )
    parser.add_argument("--container", default="", help="the engine container's name (default: recognised)")
    parser.add_argument(
        "--image", default=DEFAULT_IMAGE, help=f"the exporter image (default {DEFAULT_IMAGE})"
    )
    parser.add_argument(
        "--namespace", default="guided-decoding", help="the exporter's namespace (default guided-decoding)"
    )
    parser.add_argument(
        "--service",
        default="guided-decoding-exporter-probe",
        help="the exporter's probe Service (default guided-decoding-exporter-probe)",
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_TCP_PORT, help=f"its port (default {DEFAULT_TCP_PORT})"
    )
    parser.add_argument(
        "--audience", default=DEFAULT_AUDIENCE, help=f"the token's audience (default {DEFAULT_AUDIENCE})"
    )
    parser.add_argument(
        "--image-pythonpath",
        default="",
        metavar="PATHS",
        help="the PYTHONPATH the engine image sets in its own ENV, kept after the probe's (Kubernetes"
        " cannot see image ENV; a PYTHONPATH in the pod spec replaces it)",
    )
    parser.add_argument(
        "--warm-configmap",
        type=_configmap_name,
        default="",
        metavar="NAME",
        help="also warm the engine's grammar cache as it starts: a postStart hook runs gdx warm (from the"
        " probe's tree) over the schema files of this ConfigMap (kubectl create configmap NAME"
        " --from-file=DIR/registry/ from gdx fix; optional: without it nothing is warmed), so the"
        " container is Running, and gets traffic, with them compiled",
    )
    parser.add_argument(
        "--guard",
        choices=("off", "observe", "enforce"),
        default="",
        help="vLLM's API server's guard (GDX_GUARD; default: not set, which is off): observe counts, enforce"
        " refuses with HTTP 400, the schemas whose outlines validation killed a server of the pod, ran"
        " past the guard's bound (GDX_GUARD_MEMORY 1GiB, GDX_GUARD_TIMEOUT 1s) or that --guard-configmap's"
        " verdicts name (docs/vllm-api-server.md#the-guard)",
    )
    parser.add_argument(
        "--guard-configmap",
        type=_configmap_name,
        default="",
        metavar="NAME",
        help="the ConfigMap holding guard.json (gdx lint --engine vllm --write-guard guard.json; kubectl"
        " create configmap NAME --from-file=guard.json), mounted for the guard (GDX_GUARD_FILE); optional",
    )
    files = commands.add_parser(
        "probe-files",
        help="write the probe tree an init container copies (the exporter image runs this at build time)",
        description="Write into DIR the probe's modules, a .dist-info with its vllm.general_plugins entry"
        " point, and a sitecustomize.py (SGLang, TensorRT-LLM; it runs the image's own one after it). Put DIR"
        " on an engine's PYTHONPATH and the probe arms without the package installed.",
    )
    files.add_argument("dir", metavar="DIR")


def _configmap_name(value: str) -> str:
    if value and (not CONFIGMAP_NAME.fullmatch(value) or len(value) > 253):
        raise argparse.ArgumentTypeError(f"{value!r}: not a ConfigMap name (a-z, 0-9, - and .)")
    return value


def _read(source: str) -> tuple[str, str]:
    if source == "-":
        return "stdin", sys.stdin.read()
    return source, Path(source).read_text(encoding="utf-8")


def _sources(names: list[str]) -> list[str]:
    found: list[str] = []
    for name in names:
        path = Path(name)
        if name != "-" and path.is_dir():
            found.extend(str(p) for p in sorted(path.rglob("*")) if p.suffix in SUFFIXES and p.is_file())
        else:
            found.append(name)
    return found


def inject_text(texts: list[tuple[str, str]], options: InjectOptions) -> tuple[str, list[InjectOutcome]]:
    """The YAML out and what happened; raises InjectError (InvalidManifest for input that is no
    manifest)."""
    out: list[str] = []
    outcomes: list[InjectOutcome] = []
    for where, text in texts:
        try:
            docs = load_documents(text)
        except InvalidManifest as err:
            raise InvalidManifest(f"{where}: {err}") from None
        for number, doc in enumerate(docs, 1):
            if doc is None:
                continue
            at = f"{where}, document {number}" if len(docs) > 1 else where
            try:
                new, said = inject_object(doc, options)
                dumped = yaml.safe_dump(new, sort_keys=False, default_flow_style=False, allow_unicode=True)
            except InvalidManifest as err:
                raise InvalidManifest(f"{at}: {err}") from None
            except InjectError as err:
                raise InjectError(f"{at}: {err}") from None
            except RecursionError:
                raise InvalidManifest(f"{at}: nested too deep") from None
            outcomes.extend(said)
            out.append(dumped)
    return "".join(text + "---\n" for text in out), outcomes


def inject_main(args: argparse.Namespace) -> int:
    options = InjectOptions(
        image=args.image,
        transport=args.transport,
        engine_kind=args.engine,
        container=args.container,
        service=args.service,
        namespace=args.namespace,
        port=args.port,
        audience=args.audience,
        image_pythonpath=args.image_pythonpath,
        warm_configmap=args.warm_configmap,
        guard=args.guard,
        guard_configmap=args.guard_configmap,
    )
    try:
        texts = [_read(source) for source in _sources(args.files)]
        output, outcomes = inject_text(texts, options)
    except (OSError, UnicodeDecodeError) as err:
        print(f"gdx inject: {err}", file=sys.stderr)
        return 1
    except InvalidManifest as err:
        print(f"gdx inject: {err}; nothing written", file=sys.stderr)
        return 2
    except InjectError as err:
        print(f"gdx inject: {err}; nothing written", file=sys.stderr)
        return 1
    sys.stdout.write(output)
    sys.stdout.flush()
    for outcome in outcomes:
        line = f"{outcome.where} {outcome.status}" + (f" ({outcome.detail})" if outcome.detail else "")
        print(line, file=sys.stderr)
        for warning in outcome.warnings:
            print(f"  warning: {warning}: the probe will not arm in it", file=sys.stderr)
    if not any(o.status in ("injected", "already") for o in outcomes):
        print("gdx inject: no engine container found: nothing injected", file=sys.stderr)
    return 0


def probe_files_main(args: argparse.Namespace) -> int:
    from exporter.inject.tree import write_tree

    try:
        written = write_tree(Path(args.dir))
    except OSError as err:
        print(f"gdx probe-files: {err}", file=sys.stderr)
        return 1
    print(f"gdx probe-files: {len(written)} files in {args.dir}", file=sys.stderr)
    return 0
