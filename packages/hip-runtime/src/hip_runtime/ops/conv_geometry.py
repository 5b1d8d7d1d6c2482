"""The host arithmetic of convolutions and pooling: argument normalization and output sizes.

Pure functions of shapes and arguments (no device), torch's rules: an int or a pair per spatial
axis for stride, padding, dilation and output_padding; "same" / "valid" padding for forward
convolutions; output sizes floor((H + 2p - d(k - 1) - 1) / s) + 1, and for pooling with
`ceil_mode` the ceiling, less one where the last window would start in the right padding.
Every failure is a ValueError (TypeError for a wrong type) naming the op and the argument.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

INT_MAX = 2**31 - 1


def ints(value: Any, name: str, op: str, n: int, *, minimum: int) -> tuple[int, ...]:
    """`value` (an int, or a sequence of n ints) as n ints each >= minimum."""
    if isinstance(value, bool):
        raise TypeError(f"{op}: {name} must be an int or {n} ints, not bool")
    if isinstance(value, int):
        found: tuple[Any, ...] = (value,) * n
    elif isinstance(value, (tuple, list)):
        found = tuple(value)
        if len(found) == 1:
            found *= n
    else:
        raise TypeError(f"{op}: {name} must be an int or {n} ints, not {type(value).__name__}")
    if len(found) != n or not all(isinstance(v, int) and not isinstance(v, bool) for v in found):
        raise TypeError(f"{op}: {name} must be an int or {n} ints, not {value!r}")
    if any(v < minimum or v > INT_MAX for v in found):
        raise ValueError(f"{op}: {name} must be in [{minimum}, {INT_MAX}], not {value!r}")
    return found


@dataclass(frozen=True)
class ConvGeometry:
    """One 2-D convolution (a 1-D one has H = 1) of x [N, C, H, W] (or NHWC) by K filters of
    [C / groups, R, S] into [N, K, Ho, Wo]: paddings top/left (ph, pw) and the implicit ones
    below/right that end the last window (unequal for "same" with an even window). For a
    transposed convolution, (C, H, W) is its output and (K, Ho, Wo) its input: the forward
    convolution it is the transpose of (so the kernels and the library see one geometry)."""

    n: int
    c: int
    h: int
    w: int
    k: int
    r: int
    s: int
    ho: int
    wo: int
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    groups: int
    channels_last: bool
    symmetric: bool  # the padding below/right equals ph/pw (what a DNN library expresses)

    def launch_args(self) -> tuple[int, ...]:
        """(sh, sw, ph, pw, dh, dw): the kernels' window arguments."""
        return (*self.stride, *self.padding, *self.dilation)


def conv_geometry(
    op: str,
    x_shape: tuple[int, ...],
    w_shape: tuple[int, ...],
    args: tuple[Any, ...],
    channels_last: bool,
) -> ConvGeometry:
    """A forward convolution's geometry from 4-D shapes (conv1d's with H = 1 and its
    arguments' first axis already 1) and args (stride, padding, dilation, groups);
    ValueError / TypeError for anything torch refuses."""
    stride, padding, dilation, groups = args
    n, c, h, w = nchw(x_shape, channels_last)
    k, cg, r, s = nchw(w_shape, channels_last)
    g = _groups(op, groups, c, k, cg)
    sh, sw = ints(stride, "stride", op, 2, minimum=1)
    dh, dw = ints(dilation, "dilation", op, 2, minimum=1)
    if isinstance(padding, str):
        if padding == "valid":
            pads = ((0, 0), (0, 0))
        elif padding == "same":
            if (sh, sw) != (1, 1):
                raise ValueError(f"{op}: padding='same' needs stride 1, not {(sh, sw)}")
            # torch: the total d(k - 1) split with the odd element below/right.
            th, tw = dh * (r - 1), dw * (s - 1)
            pads = ((th // 2, th - th // 2), (tw // 2, tw - tw // 2))
        else:
            raise ValueError(f"{op}: padding must be 'same', 'valid' or ints, not {padding!r}")
    else:
        ph, pw = ints(padding, "padding", op, 2, minimum=0)
        pads = ((ph, ph), (pw, pw))
    ho = _out_size(h, pads[0], r, sh, dh)
    wo = _out_size(w, pads[1], s, sw, dw)
    if ho <= 0 or wo <= 0:
        raise ValueError(
            f"{op}: the input's spatial size {(h, w)} (padded {pads}) is smaller than the "
            f"dilated window {(dh * (r - 1) + 1, dw * (s - 1) + 1)}"
        )
    symmetric = pads[0][0] == pads[0][1] and pads[1][0] == pads[1][1]
    return ConvGeometry(n, c, h, w, k, r, s, ho, wo, (sh, sw), (pads[0][0], pads[1][0]),
                        (dh, dw), g, channels_last, symmetric)  # fmt: skip


def conv_transpose_geometry(
    op: str,
    x_shape: tuple[int, ...],
    w_shape: tuple[int, ...],
    args: tuple[Any, ...],
    channels_last: bool,
) -> ConvGeometry:
    """A transposed convolution of x [N, Cin, H, W] by w [Cin, Cout / groups, R, S] (NHWC:
    [Cin, R, S, Cout / groups]) as the forward geometry it transposes (see ConvGeometry):
    output (H - 1)·s - 2p + d(k - 1) + output_padding + 1. args: (stride, padding,
    output_padding, groups, dilation), torch's order."""
    stride, padding, output_padding, groups, dilation = args
    n, cin, h, w = nchw(x_shape, channels_last)
    wk, coutg, r, s = nchw(w_shape, channels_last)
    if wk != cin:
        raise ValueError(f"{op}: weight has {wk} input channels (its first axis); x has {cin}")
    _groups_of(op, groups, cin)
    sh, sw = ints(stride, "stride", op, 2, minimum=1)
    ph, pw = ints(padding, "padding", op, 2, minimum=0)
    dh, dw = ints(dilation, "dilation", op, 2, minimum=1)
    oph, opw = ints(output_padding, "output_padding", op, 2, minimum=0)
    if oph >= max(sh, dh) or opw >= max(sw, dw):
        raise ValueError(
            f"{op}: output_padding {(oph, opw)} must be smaller than stride {(sh, sw)} or "
            f"dilation {(dh, dw)}"
        )
    ho = (h - 1) * sh - 2 * ph + dh * (r - 1) + oph + 1
    wo = (w - 1) * sw - 2 * pw + dw * (s - 1) + opw + 1
    if ho <= 0 or wo <= 0:
        raise ValueError(f"{op}: the output size {(ho, wo)} is not positive (padding too large)")
    # The forward convolution of the [ho, wo] output to the [h, w] input: its padding below
    # is ph + output_padding (the rows output_padding adds are read by no window's end).
    return ConvGeometry(n, coutg * groups, ho, wo, cin, r, s, h, w, (sh, sw), (ph, pw),
                        (dh, dw), groups, channels_last, oph < sh and opw < sw)  # fmt: skip


def nchw(shape: tuple[int, ...], channels_last: bool) -> tuple[int, int, int, int]:
    """A 4-D shape's (N, C, H, W), read from [N, H, W, C] when channels_last."""
    a, b, c, d = shape
    return (a, d, b, c) if channels_last else (a, b, c, d)


def _groups_of(op: str, groups: Any, c: int) -> None:
    """groups is a positive int dividing x's c channels; ValueError otherwise."""
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{op}: groups must be a positive int, not {groups!r}")
    if c % groups:
        raise ValueError(f"{op}: x's {c} channels are not divisible by groups={groups}")


def _groups(op: str, groups: Any, c: int, k: int, cg: int) -> int:
    """A forward convolution's groups, checked against x's c channels and the weight's k
    output and cg input channels per group."""
    _groups_of(op, groups, c)
    if k % groups:
        raise ValueError(f"{op}: weight's {k} output channels are not divisible by groups={groups}")
    if cg != c // groups:
        raise ValueError(
            f"{op}: weight has {cg} input channels per group; x's {c} channels in {groups} "
            f"groups need {c // groups}"
        )
    return int(groups)


def _out_size(size: int, pads: tuple[int, int], k: int, stride: int, dilation: int) -> int:
    return (size + pads[0] + pads[1] - dilation * (k - 1) - 1) // stride + 1


def pool_out_size(
    op: str, size: int, k: int, stride: int, pad: int, dilation: int, ceil_mode: bool
) -> int:
    """torch's pooling output size along one axis; ValueError when no window fits."""
    span = size + 2 * pad - dilation * (k - 1) - 1
    out = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1  # the last window would start in the right padding
    if span < 0 or out <= 0:
        raise ValueError(f"{op}: the input size {size} (padding {pad}) is smaller than the window")
    return out


__all__ = [
    "ConvGeometry", "conv_geometry", "conv_transpose_geometry", "ints", "nchw", "pool_out_size",
]  # fmt: skip
