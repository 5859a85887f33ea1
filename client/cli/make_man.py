#!/usr/bin/python3
"""make_man.py RCKPT OUTDIR: the manual pages of the rckpt command,
written from its own --help texts (rckpt --help, rckpt COMMAND --help), so
that the pages and the help cannot drift: rckpt.1 and rckpt-COMMAND.1 for
each command the main help lists. Run by the build (client/CMakeLists.txt)
with the command it built."""
import os
import re
import subprocess
import sys


def roff(text):
    out = []
    for line in text.rstrip("\n").split("\n"):
        line = line.replace("\\", "\\e").replace("-", "\\-")
        if line.startswith((".", "'")):
            line = "\\&" + line
        out.append(line)
    return "\n".join(out)


def page(name, section_title, summary, version, text):
    return "\n".join([
        '.TH %s 1 "" "rckpt %s" "rckpt manual"' % (name.upper(), version),
        ".SH NAME",
        "%s \\- %s" % (name.replace("-", "\\-"), roff(summary)),
        ".SH DESCRIPTION",
        ".nf",
        roff(text),
        ".fi",
        ".SH SEE ALSO",
        section_title,
        "",
    ])


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: make_man.py RCKPT OUTDIR")
    rckpt, out = sys.argv[1], sys.argv[2]
    env = dict(os.environ)
    env.pop("CEPH_CONF", None)

    def help_of(*args):
        r = subprocess.run([rckpt, *args, "--help"], capture_output=True, text=True, env=env, timeout=60)
        if r.returncode != 0 or not r.stdout.startswith("usage:"):
            sys.exit("make_man.py: '%s %s --help' failed: %s" % (rckpt, " ".join(args), r.stderr.strip()))
        return r.stdout

    main_help = help_of()
    ver = subprocess.run([rckpt, "version"], capture_output=True, text=True, env=env, timeout=60).stdout
    m = re.match(r"librckpt (\S+)", ver)
    version = m.group(1) if m else "?"
    # the commands and their one-line summaries, from the main help
    cmds, cur = [], None
    block = main_help.split("\ncommands:\n", 1)[1].split("\n\n", 1)[0]
    for line in block.split("\n"):
        m = re.match(r"  (\w+) +(.*)", line)
        if m:
            cur = [m.group(1), m.group(2)]
            cmds.append(cur)
        elif cur and line.strip():
            cur[1] += " " + line.strip()
    if not cmds:
        sys.exit("make_man.py: no commands in '%s --help'" % rckpt)
    os.makedirs(out, exist_ok=True)
    see = ", ".join("\\fBrckpt\\-%s\\fR(1)" % c for c, _ in cmds)
    with open(os.path.join(out, "rckpt.1"), "w") as f:
        f.write(page("rckpt", see, "compressed deep-learning checkpoints and training data on Ceph",
                     version, main_help))
    for c, summary in cmds:
        with open(os.path.join(out, "rckpt-%s.1" % c), "w") as f:
            f.write(page("rckpt-" + c, "\\fBrckpt\\fR(1)", summary, version, help_of(c)))
    print("make_man.py: %d pages in %s" % (len(cmds) + 1, out))


if __name__ == "__main__":
    main()
