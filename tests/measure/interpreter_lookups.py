"""A faster lookup for Triton's CPU interpreter, for the test suite only (tests/measure/conftest.py installs it).

Under TRITON_INTERPRET=1, every interpreted call of a @triton.jit function (each kernel launch and each helper it
calls) re-patches triton.language, and finds what to patch with inspect.getmembers over four modules and classes
(triton/runtime/interpreter.py, _patch_lang -> _patch_builtin): ~0.2 ms each, a quarter of the fused decode step's
interpreted time. The names of their builtins do not change, so they are listed once here, before anything is
patched; each call then patches, exactly as Triton's own _patch_builtin does, every listed name whose current
member is a builtin (a helper called inside a kernel finds them already patched and patches nothing, as before).
Results are bit-identical: the same members are wrapped the same way, and Triton's own scopes undo them. Where the
interpreter lacks these functions (another Triton), nothing is installed and the tests run at Triton's own speed.

Likewise _get_np_dtype (the numpy dtype a Triton dtype's values are held in, asked at every load, store, cast and
constant) builds its table of 19 numpy dtypes at each call: 83,838 calls, 1.8 s cumulative, in a cProfile of
test_fused_step_above_16_rows_through_the_tensor_core_row_blocks (2026-12-03, before this change: `python -m cProfile
-o t.prof -m pytest -n 0 -p no:cacheprovider tests/measure/test_gemma4_decode.py -k above_16`). Its answers are kept
per dtype here, the first answer for each computed by Triton's own function.
"""

from __future__ import annotations

import inspect


def install() -> bool:
    """Replace triton.runtime.interpreter._patch_builtin with the listed-names version; False if not possible."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter as interp
    except Exception:  # noqa: BLE001 (no triton, or one that fails to import: the tests skip or fail on their own)
        return False
    original, patch_attr = getattr(interp, "_patch_builtin", None), getattr(interp, "_patch_attr", None)
    is_builtin = getattr(getattr(tl, "core", None), "is_builtin", None)
    if original is None or patch_attr is None or is_builtin is None or getattr(original, "listed", False):
        return False
    pkgs = [tl, tl.core, tl.core.tensor, tl.math]
    if hasattr(tl.core, "tensor_descriptor_base"):
        pkgs.append(tl.core.tensor_descriptor_base)
    names = {id(p): (p, tuple(n for n, m in inspect.getmembers(p) if is_builtin(m))) for p in pkgs}

    def patch_builtin(pkg, builder, scope):
        hit = names.get(id(pkg))
        if hit is None or hit[0] is not pkg:
            return original(pkg, builder, scope)
        for name in hit[1]:
            member = getattr(pkg, name, None)
            if is_builtin(member):
                patch_attr(pkg, name, member, builder, scope)

    patch_builtin.listed = True
    patch_builtin.original = original
    interp._patch_builtin = patch_builtin
    _keep_np_dtypes(interp)
    return True


def _keep_np_dtypes(interp) -> None:
    """interp._get_np_dtype with each dtype's answer kept, looked up by the dtype (a dict: its hash, then Triton's
    own equality, under which equal dtypes have equal answers)."""
    original = getattr(interp, "_get_np_dtype", None)
    if original is None or getattr(original, "kept", False):
        return
    answers: dict = {}
    block_type = getattr(getattr(interp, "tl", None), "block_type", None)

    def get_np_dtype(tt_dtype):
        # a block's values are held as its element type's are (Triton's own function answers a block_type from its
        # element_ty, pointer or not); a block_type is unhashable (it defines __eq__ only), so key on the element
        key = tt_dtype.element_ty if block_type is not None and isinstance(tt_dtype, block_type) else tt_dtype
        try:
            return answers[key]
        except KeyError:
            answers[key] = answer = original(key)
            return answer
        except TypeError:  # an unhashable dtype: Triton's own answer, not kept
            return original(tt_dtype)

    get_np_dtype.kept = True
    interp._get_np_dtype = get_np_dtype
