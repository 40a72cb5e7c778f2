#!/usr/bin/env python3
"""ansible/ci.sh: splits the Windows service's binary path (a file holding one command line)
into the arguments a Go program sees in os.Args on Windows, and writes them NUL-terminated.
With a second file, a JSON list, fails unless the arguments are exactly that list.

Go's rules (os.commandLineToArgv on Windows), the program name included: spaces and tabs
outside double quotes end an argument; a double quote after an even number 2n of
backslashes gives n backslashes and opens or closes quoting (two double quotes inside
quoting give one literal double quote and close it); after an odd number 2n+1 it gives n
backslashes and a literal double quote; other backslashes are literal.
"""
import json
import sys


def split(line):
    args = []
    i, n = 0, len(line)
    while i < n:
        if line[i] in " \t":
            i += 1
            continue
        arg, quoted, slashes = [], False, 0
        while i < n:
            c = line[i]
            if c in " \t" and not quoted:
                break
            if c == "\\":
                slashes += 1
                i += 1
                continue
            if c == '"':
                arg.append("\\" * (slashes // 2))
                if slashes % 2:
                    arg.append('"')
                else:
                    if quoted and i + 1 < n and line[i + 1] == '"':
                        arg.append('"')
                        i += 1
                    quoted = not quoted
                slashes = 0
                i += 1
                continue
            arg.append("\\" * slashes + c)
            slashes = 0
            i += 1
        arg.append("\\" * slashes)
        args.append("".join(arg))
    return args


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        line = f.read().rstrip("\n")
    args = split(line)
    if len(sys.argv) > 2:
        with open(sys.argv[2], encoding="utf-8") as f:
            want = json.load(f)
        if args != want:
            sys.stderr.write("winargv: %s splits into\n  %r\nwant\n  %r\n" % (sys.argv[1], args, want))
            sys.exit(1)
    for a in args:
        if "\0" in a:
            sys.exit("winargv: NUL in an argument")
        sys.stdout.write(a + "\0")


if __name__ == "__main__":
    main()
