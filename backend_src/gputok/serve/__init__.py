"""`gputok-serve` / `python -m gputok.serve`: run and supervise Triton Inference Server on our
model repository. `cli` parses options and reads the key, `supervisor` restarts a crashed
server, `shm` frees the shared memory a dead server leaves; `triton` starts and stops the
tritonserver that PyPI's nvidia-pytriton==0.7.0 bundles (server 2.51), which `dist` finds,
with the stub environment of `stubenv` and the port and process helpers of `procs`."""

from gputok.serve.cli import build_parser, default_model_repository, main, needed_packages

__all__ = ["build_parser", "default_model_repository", "main", "needed_packages"]
