"""Reseeds the guest kernel's random number generator with bytes from the host (stdin), run inside
a microVM by its VM agent as root before each job (vm-job.ts: `python3 -I -S`, the seed the
host sent in its prepare or attach request). Every VM restored from one warm snapshot wakes
with the same generator state, so without this each would hand its job the same "random" bytes
(/dev/urandom, getrandom: keys, tokens, UUIDs). The bytes are added to the input pool with their
entropy credited (RNDADDENTROPY), and the generator is rekeyed from the pool at once
(RNDRESEEDCRNG), rather than at its next scheduled reseed.
"""
import fcntl
import os
import struct
import sys

RNDADDENTROPY = 0x40085203
RNDRESEEDCRNG = 0x5207


def main():
    seed = sys.stdin.buffer.read()
    if len(seed) < 32:
        sys.stderr.write("reseed-random: at least 32 bytes of seed are needed, got %d\n" % len(seed))
        return 2
    fd = os.open("/dev/urandom", os.O_WRONLY)
    try:
        # struct rand_pool_info: entropy_count (bits), buf_size (bytes), then the bytes.
        fcntl.ioctl(fd, RNDADDENTROPY, struct.pack("ii", len(seed) * 8, len(seed)) + seed)
        fcntl.ioctl(fd, RNDRESEEDCRNG)
    finally:
        os.close(fd)
    return 0


sys.exit(main())
