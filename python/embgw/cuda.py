# SPDX-License-Identifier: BSD-3-Clause
"""Moving a room's tokens between the pool and tensors on any device.

The pool is host memory the gateway shares with the engine. A device
tensor copies to and from it at PCIe speed only when that memory is
pinned for CUDA: register() pins a mapping (cudaHostRegister, where
torch.cuda.is_available()), and the copies below run asynchronously on a
given stream, returning a handle (query(), synchronize()) that says when
the bytes have moved. Without CUDA, or with CPU tensors, the copies are
synchronous and the handle is done at once.

Everything here takes the mapping and the views (NumPy arrays over the
pool) as arguments: the Client and its rooms use it on the gateway's
pool, and it runs alone on any buffer - importing embgw.cuda loads no
library of embgw's.
"""
import logging

import numpy as np

log = logging.getLogger("embgw")
HOST_REGISTER_PORTABLE = 0x1
HOST_REGISTER_READ_ONLY = 0x8

__all__ = ["Done", "Pending", "Registration", "available", "copy_in",
           "copy_out", "register", "torch_views"]


def _torch():
    import torch
    return torch


def available():
    """CUDA can be used: PyTorch is installed, built with CUDA, and sees a
    device."""
    try:
        torch = _torch()
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


class Registration:
    """A host mapping pinned for CUDA (cudaHostRegister); close()
    unregisters it. The mapping must stay mapped until then."""

    def __init__(self, ptr, nbytes, readonly=False):
        torch = _torch()
        cudart = torch.cuda.cudart()
        # portable: pinned for every CUDA context of the process; a
        # read-only mapping (a language port's pool) must say so
        flags = HOST_REGISTER_PORTABLE | \
            (HOST_REGISTER_READ_ONLY if readonly else 0)
        torch.cuda.check_error(cudart.cudaHostRegister(ptr, nbytes, flags))
        self.ptr = ptr
        self.nbytes = nbytes

    def close(self):
        if self.ptr is not None:
            torch = _torch()
            torch.cuda.check_error(
                torch.cuda.cudart().cudaHostUnregister(self.ptr))
            self.ptr = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def register(mapping, required=False, readonly=False):
    """Pin `mapping` (a NumPy array over the whole host mapping; mapped
    read-only when `readonly`) for CUDA copies. @return a Registration,
    or None where CUDA is not available or refuses (copies then go through
    pageable memory: correct, slower) - unless `required`, which raises
    RuntimeError instead."""
    if not available():
        if required:
            raise RuntimeError("CUDA pinning asked for, but torch.cuda is "
                               "not available")
        return None
    ptr = mapping.__array_interface__["data"][0]
    try:
        return Registration(ptr, mapping.nbytes, readonly)
    except RuntimeError as e:
        if required:
            raise
        log.warning("embgw: the pool stays unpinned for CUDA (copies at "
                    "pageable speed): %s", e)
        return None


class Done:
    """The handle of a copy that has completed."""

    def query(self):
        return True

    def synchronize(self):
        pass


class Pending:
    """The handle of asynchronous copies: a CUDA event recorded after them
    on their stream."""

    def __init__(self, event):
        self.event = event

    def query(self):
        return self.event.query()

    def synchronize(self):
        self.event.synchronize()


def torch_views(views, bf16=False):
    """Tensors over the same memory as the NumPy views, no copy. NumPy has
    no bfloat16: a bf16 pool's views are uint16 and become torch.bfloat16
    (the same bits)."""
    torch = _torch()
    out = []
    for v in views:
        if bf16:
            if v.dtype != np.uint16:
                raise TypeError("a bf16 view is uint16, got %s" % v.dtype)
            out.append(torch.from_numpy(v.view(np.int16))
                       .view(torch.bfloat16))
        else:
            out.append(torch.from_numpy(v))
    return out


def as_tensor(x, bf16=False):
    """A tensor or a NumPy array as a tensor: a bf16 pool's uint16 arrays
    (what views() gives) are taken bitwise as torch.bfloat16."""
    if not isinstance(x, np.ndarray):
        return x
    torch = _torch()
    if bf16 and x.dtype == np.uint16:
        return torch.from_numpy(np.ascontiguousarray(x).view(np.int16)) \
            .view(torch.bfloat16)
    return torch.from_numpy(x)


def _same(views, t):
    if views and views[0].dtype != t.dtype:
        raise TypeError("expected %s, got %s" % (views[0].dtype, t.dtype))


def _split(ranges, total):
    if sum(n for n, _ in ranges) != total:
        raise ValueError("the views hold %d tokens, the tensor %d"
                         % (sum(n for n, _ in ranges), total))


def _copy(pairs, device_tensor, stream):
    """dst.copy_(src) for each (dst, src): at once, or for a CUDA
    `device_tensor` queued on `stream` (default: its device's current
    stream) with an event after them. @return the handle."""
    if not getattr(device_tensor, "is_cuda", False):
        for dst, src in pairs:
            dst.copy_(src)
        return Done()
    torch = _torch()
    s = stream if stream is not None else \
        torch.cuda.current_stream(device_tensor.device)
    with torch.cuda.stream(s):
        for dst, src in pairs:
            dst.copy_(src, non_blocking=True)
        ev = torch.cuda.Event()
        ev.record(s)
    # the caching allocator may reuse the tensor's memory once the engine
    # drops it: keep it alive for the copy's stream
    device_tensor.record_stream(s)
    return Pending(ev)


def copy_in(views, ranges, src, stream=None):
    """Copy `src` ((total, ...) tensor on any device) into the pool views:
    src[first:first + n] into views[i] for (n, first) = ranges[i]. A CUDA
    tensor is copied on `stream` (default: its device's current stream, so
    after whatever produced it there) without waiting. @return a handle:
    the pool holds the bytes once handle.query() is True."""
    _split(ranges, src.shape[0])
    _same(views, src)
    return _copy([(v, src[first:first + n])
                  for v, (n, first) in zip(views, ranges)], src, stream)


def copy_out(views, ranges, out, stream=None):
    """Copy the pool views into `out` ((total, ...), contiguous, any
    device); on `stream` for a CUDA `out`. @return a handle: `out` holds
    the bytes, and the views may be let go, once handle.query() is True."""
    _split(ranges, out.shape[0])
    if not out.is_contiguous():
        raise ValueError("out must be contiguous")
    _same(views, out)
    return _copy([(out[first:first + n], v)
                  for v, (n, first) in zip(views, ranges)], out, stream)
