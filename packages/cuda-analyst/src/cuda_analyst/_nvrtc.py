"""Standalone NVRTC compile (no device needed): ``python _nvrtc.py LIBNVRTC kernel.cu ARCH``.

Prints ``{"ok": bool, "log": str, "ptx_bytes": int}``; writes ``kernel.ptx`` on success.
"""

import ctypes
import json
import sys


def main():
    lib = ctypes.CDLL(sys.argv[1])
    with open(sys.argv[2], "rb") as f:
        src = f.read()
    prog = ctypes.c_void_p()
    rc = lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"kernel.cu", 0, None, None)
    if rc != 0:
        print(json.dumps({"ok": False, "log": f"nvrtcCreateProgram failed ({rc})", "ptx_bytes": 0}))
        return
    opts = (ctypes.c_char_p * 1)(f"--gpu-architecture={sys.argv[3]}".encode())
    rc = lib.nvrtcCompileProgram(prog, 1, opts)
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    buf = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, buf)
    log = buf.value.decode(errors="replace")
    ptx = 0
    if rc == 0:
        lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
        pbuf = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetPTX(prog, pbuf)
        with open("kernel.ptx", "wb") as f:
            f.write(pbuf.raw)
        ptx = size.value
    print(json.dumps({"ok": rc == 0, "log": log, "ptx_bytes": ptx}))


if __name__ == "__main__":
    main()
