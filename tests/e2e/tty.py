"""Runs a command with its stdout or stderr on a pseudo-terminal (what a person at a terminal sees).

usage: tty.py stdout|stderr OUTFILE CMD...
The chosen stream goes to a new pty whose bytes are copied to OUTFILE as written (a terminal turns "\\n"
into "\\r\\n"); the other streams are inherited, so the shell's redirections apply. Exits with CMD's status.
"""
import os
import subprocess
import sys


def main():
    which, out, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
    master, slave = os.openpty()
    kw = {"stdout": slave} if which == "stdout" else {"stderr": slave}
    proc = subprocess.Popen(cmd, **kw)
    os.close(slave)
    got = bytearray()
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every writer closed the pty
            break
        if not chunk:
            break
        got += chunk
    os.close(master)
    with open(out, "wb") as f:
        f.write(got)
    sys.exit(proc.wait())


if __name__ == "__main__":
    main()
