# Arranges a session kernel's descriptors, then execs it (argv[1:] is the kernel's command line):
# the protocol moves to fds 3 (requests) and 4 (replies), fds 1 and 2 become the capture files
# (/tmp/.session/stdout and stderr, appended to, emptied after each cell) and fd 0 /dev/null. Then
# whatever a cell prints, and whatever the processes it starts print, lands in the files and never
# in the protocol. Python does it because node cannot: it has no dup2, and its stdio pipes are
# sockets, which cannot be reopened through /proc. Launched by src/session/kernel-launcher.ts.
import os
import sys

os.dup2(0, 3)
os.dup2(1, 4)
null = os.open("/dev/null", os.O_RDONLY)
os.dup2(null, 0)
os.close(null)
os.makedirs("/tmp/.session", mode=0o700, exist_ok=True)
for fd, name in ((1, "stdout"), (2, "stderr")):
    capture = os.open("/tmp/.session/" + name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
    os.dup2(capture, fd)
    os.close(capture)
os.execv(sys.argv[1], sys.argv[1:])
