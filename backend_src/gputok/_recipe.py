"""How a Tokenizer pickles (for multiprocessing, Dask and the like): as the gputok function
that built it (``gpt2``, ``get_encoding``'s, a ``load_*``), its arguments, the settings
changed since (``set_*``) and its name, replayed in the receiving process. The vocabulary is built there
again (gpt2's ~0.1 s); a file it was loaded from must be at the same path there. A Tokenizer
built from a ``Vocab`` directly has no recipe and refuses to pickle, naming the ways that do.
Unpickling calls only the functions and setters listed here."""

from __future__ import annotations

BUILDERS = ("gpt2", "load_tiktoken_file", "load_hf_files", "load_tokenizer_json")
SETTINGS = ("piece_cache_bytes", "cpu_spin_us", "pool_limit", "cpu_below_bytes", "gpu_pretokenize")


def record(tok, builder: str, args: tuple, kwargs: dict):
    """``tok``, marked as built by ``gputok.<builder>(*args, **kwargs)``."""
    tok._recipe = (builder, tuple(args), dict(kwargs))
    return tok


def reduce(tok):
    """``Tokenizer.__reduce__``: rebuild(builder, args, kwargs, settings changed since)."""
    if tok._recipe is None:
        raise TypeError(
            f"Tokenizer {tok.name!r} was built from a Vocab directly and cannot be pickled: "
            "build it with gputok.gpt2(), gputok.get_encoding() or a gputok.load_* function, "
            "which record how to build it again"
        )
    return (rebuild, (*tok._recipe, dict(tok._changed), tok.name))


def rebuild(builder: str, args: tuple, kwargs: dict, changed: dict, name: str | None = None):
    """The Tokenizer ``gputok.<builder>(*args, **kwargs)`` gives, with ``changed``'s setters
    (name -> their arguments) called again, named ``name`` (get_encoding renames gpt2's)."""
    import gputok

    if builder not in BUILDERS or not set(changed) <= set(SETTINGS):
        raise ValueError(f"not a gputok Tokenizer's recipe: {builder!r}, {sorted(changed)}")
    tok = getattr(gputok, builder)(*args, **kwargs)
    for setting, values in changed.items():
        getattr(tok, "set_" + setting)(*values)
    if name is not None:
        tok.name = str(name)
    return tok
