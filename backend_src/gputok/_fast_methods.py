"""encode(), encode_ordinary() and encode_to_numpy() of one Tokenizer as builtin functions.

A call of the text alone is most of what these methods serve, and for a short text the
method's own Python frame was a large part of it: 64 tokens took 827 ns with the builtin
against 930 through the method on the H200 host, 907 against 1,068 on the 2-core dev VM
(2026-11-29, bench/bench_fast_methods.py). So each Tokenizer gets, in place of each of these methods, a
builtin (the native `Core.encoder` given the method, bindings/fast_call.h) that encodes a lone
text itself and hands any other call (keywords, more arguments) to the class's method, with
the Tokenizer first and the arguments unchanged: up to ~50 ns more than calling the method
(one native hop; same runs). A subclass that defines one of these methods keeps its own.

As a bound method did, the builtin holds its Tokenizer (a cycle the garbage collector frees),
and pickles as the Tokenizer's method of that name (multiprocessing's pool.map(tok.encode)).
"""

from __future__ import annotations

# (method, the policy it encodes a lone text with, numpy output)
FAST_METHODS = (
    ("encode", "default", False),
    ("encode_ordinary", "ordinary", False),
    ("encode_to_numpy", "default", True),
)


def bind_fast_methods(tok, base: type) -> None:
    """Sets tok.encode, tok.encode_ordinary and tok.encode_to_numpy to builtins (see above),
    except where type(tok) overrides base's method."""
    policies = {"default": tok._default_policy, "ordinary": ([], [])}
    for name, policy, numpy in FAST_METHODS:
        method = getattr(type(tok), name)
        if method is not getattr(base, name):
            continue
        fast = tok._core.encoder(
            *policies[policy],
            "strict",
            numpy=numpy,
            method=method,
            target=tok,
            name=name,
            doc=method.__doc__ or "",
        )
        setattr(tok, name, fast)
