#!/usr/bin/env python3
"""check_layers.py — holds the sources to the intended layering.

Every `#include "..."` of the product's sources (client/, cls/, gpu/,
formats/) is resolved to the file it names and the edge between their
modules is checked against the table below:

  formats  the on-disk and on-wire formats; the bottom, shared by all
  gpu      CUDA kernels behind a C header (gpu/include/rckpt_gpu.h)
  cls      the object-class plugins that run in the OSDs
  public   client/include/rckpt.h, the library's one public header (with its parts)
  common   client/lib/*: the handle, errors, names, time, plugin calls
  codec    client/lib/codec: checkpoint encoding and decoding
  store    client/lib/store: jobs, saves, restores, policy on RADOS (and
           the rckpt class's read methods, run in the client when the
           OSDs cannot: cls exports their header to it)
  pcr      client/lib/pcr: training data (PCR records, the loader)
  cli      client/cli: the rckpt command

A module may include its own headers, and of the modules below it only
the headers they export to other modules (EXPORTS); the rest of a wing's
headers are private to it. store and pcr are siblings: no arrow between
them.

Inside a wing (and the command, client/cli), the files stand in floors (FLOORS, from the top down): a
file may name a function or variable that another file of its wing
defines only when that file stands below it, so no two files call each
other, directly or around a circle, and nothing calls back up. Every .c
file of such a wing must have its place there.

And no function of client/lib or cls/ runs over FUNCTION_MAX lines (from
the brace that opens it at the start of a line to the one that closes it).

Exits 1 naming every edge that breaks the tables, or function too long; --graph prints the
module graph as it is, --calls the calls between the files of each wing.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Where each module's files live (longest prefix wins).
DIRS = {
    "formats": "formats",
    "gpu": "gpu",
    "cls": "cls",
    "public": "client/include",
    "common": "client/lib",
    "codec": "client/lib/codec",
    "store": "client/lib/store",
    "pcr": "client/lib/pcr",
    "cli": "client/cli",
}

# What each module may include from others.
ALLOWED = {
    "formats": set(),
    "gpu": {"formats"},
    "cls": {"formats"},
    "public": set(),
    "common": {"public", "formats", "gpu"},
    "codec": {"common", "public", "formats", "gpu"},
    "store": {"codec", "common", "public", "formats", "cls"},
    "pcr": {"common", "public", "formats"},
    "cli": {"public", "formats"},
}

# The headers a module offers to the others; None: all of them. Anything
# else in a wing is its own business.
EXPORTS = {
    "formats": None,
    "gpu": None,
    "cls": {"cls_common.h", "cls_rckpt_methods.h"},
    "public": None,
    "common": {"rckpt_internal.h", "rckpt_io.h"},
    "codec": {"rckpt_ckenc.h", "rckpt_ckdec.h", "rckpt_codec.h", "rckpt_quant.h",
              "rckpt_sketch.h", "rckpt_gpuenc.h", "rckpt_safetensors.h", "rckpt_tset.h",
              "rckpt_layout.h"},
    "store": set(),
    "pcr": set(),
    "cli": set(),
}

# The files of a wing from the top down: each may use what the files
# after it define, never what those before it define.
FLOORS = {
    "client/lib": ["rckpt_plugin.c", "rckpt_handle.c", "rckpt_io_rados.c", "rckpt_io_dump.c",
                   "rckpt_common.c", "rckpt_io.c"],
    "client/lib/codec": [
        "rckpt_files.c",                          # files in, files out
        "ckenc_handle.c", "ckenc_step.c",         # the encoder: its handle, a step
        "ckenc_partial.c", "ckenc_resume.c", "ckenc_search.c", "ckenc_judge.c", "ckenc_emit.c",
        "ckenc_cpu.c", "ckenc_cuda.c", "rckpt_gpuenc.c",   # the compute backends
        "ckenc_optim.c", "ckenc_values.c", "ckenc_state.c", "ckenc_par.c",
        "rckpt_stepfile.c", "rckpt_safetensors.c", "rckpt_layout.c", "rckpt_tset.c",
        "rckpt_ckdec.c", "rckpt_par.c", "rckpt_codec.c", "rckpt_kmeans.c", "rckpt_sketch.c", "rckpt_quant.c"],
    "client/lib/store": [
        "rckpt_group.c", "rckpt_group_world.c", "rckpt_group_part.c", "rckpt_group_xchg.c",
        "rckpt_group_plan.c",
        "rckpt_rewind.c", "rckpt_branch.c",
        "rckpt_save.c",                           # a writer compacts every compact_every saves
        "rckpt_compact.c", "rckpt_store_admin.c", "rckpt_policy.c",
        "rckpt_restore.c", "rckpt_exact.c", "rckpt_segment.c",
        "rckpt_job.c", "rckpt_holder.c",          # the job's handle
        "rckpt_objects.c", "rckpt_fold.c"],       # the floor: calls on the job's objects
    "client/cli": [
        "rckpt_cli.c",                            # main, above the command groups
        "rckpt_cli_bench.c", "rckpt_cli_codec.c", "cli_status.c", "cli_call.c",
        "rckpt_cli_pcr.c", "cli_pcr_build.c", "cli_pcr_get.c", "cli_pcr_info.c", "cli_pcr_verify.c",
        "cli_pcr_util.c",
        "rckpt_cli_ckpt.c", "cli_ckpt_compact.c", "cli_ckpt_verify.c", "cli_ckpt_admin.c", "cli_ckpt_export.c",
        "cli_ckpt_ls.c", "cli_ckpt_restore.c", "cli_ckpt_save.c", "cli_attach.c", "cli_ckpt_util.c",
        "cli_args.c", "cli_signals.c", "cli_files.c", "cli_out.c", "cli_progress.c",
        "cli_lock.c"],                            # the utility layer (cli.h)
    "client/lib/pcr": ["rckpt_mpi.c", "rckpt_loader.c", "rckpt_locality.c", "rckpt_pcr_fetch.c",
                       "rckpt_pcr_read.c",
                       "rckpt_pcr_build.c", "rckpt_pcr_script.c", "rckpt_ssim.c"],
}

# The longest a function of these folders may be, in lines.
FUNCTION_MAX = 150
FUNCTION_DIRS = ("client/lib", "cls")

# Headers generated at build time, and the module they belong to.
GENERATED = {"rckpt_build_info.h": "formats"}

EXTS = (".c", ".h", ".cc", ".hpp", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def module_of(rel):
    best = None
    for mod, d in DIRS.items():
        if rel.startswith(d + "/") and (best is None or len(d) > len(DIRS[best])):
            best = mod
    return best


def sources():
    for top in ("client", "cls", "gpu", "formats"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            if "/python" in dirpath:
                continue
            for f in sorted(files):
                if f.endswith(EXTS):
                    yield os.path.relpath(os.path.join(dirpath, f), ROOT)


def _code(text):
    """The text without comments and string literals' contents."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', text)


# A definition at the start of a line that is not static: a function, or
# a variable given a value.
DEFINITION = re.compile(r"^(?!static\b|typedef\b|struct\b|enum\b|union\b|extern\b|#)"
                        r"[A-Za-z_][\w \t*]*?\b([A-Za-z_]\w*)\s*(?:\(|=|\[)", re.M)
WORD = re.compile(r"\b[A-Za-z_]\w*\b")


def floor_errors(show):
    """The calls between the files of each wing of FLOORS that do not run
    down, and the wing's .c files that have no floor."""
    errors = []
    for d, order in FLOORS.items():
        files = sorted(f for f in os.listdir(os.path.join(ROOT, d)) if f.endswith(".c"))
        for f in files:
            if f not in order:
                errors.append(f"{d}/{f} has no floor in FLOORS[{d!r}]")
        for f in order:
            if f not in files:
                errors.append(f"FLOORS[{d!r}] names {f}, which is not there")
        code = {f: _code(open(os.path.join(ROOT, d, f), encoding="utf-8").read()) for f in files}
        owner = {}
        for f in files:
            for m in DEFINITION.finditer(code[f]):
                owner.setdefault(m.group(1), f)
        for f in files:
            uses = {}
            for w in set(WORD.findall(code[f])):
                g = owner.get(w)
                if g and g != f:
                    uses.setdefault(g, []).append(w)
            for g, names in sorted(uses.items()):
                if show:
                    print(f"{d}: {f} -> {g}: {', '.join(sorted(names))}")
                if f in order and g in order and order.index(f) > order.index(g):
                    errors.append(f"{d}/{f} uses {', '.join(sorted(names))} of {g}, a floor above it")
    return errors


def long_functions():
    """The functions of FUNCTION_DIRS over FUNCTION_MAX lines."""
    errors = []
    for top in FUNCTION_DIRS:
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for f in sorted(files):
                if not f.endswith((".c", ".cc")):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, f), ROOT)
                lines = open(os.path.join(ROOT, rel), encoding="utf-8").read().split("\n")
                start = None
                for i, line in enumerate(lines):
                    if line == "{":
                        start = i
                    elif line == "}" and start is not None:
                        if i - start + 1 > FUNCTION_MAX:
                            head = next((lines[k] for k in range(start - 1, -1, -1) if "(" in lines[k]), "?")
                            name = re.search(r"(\w+)\s*\(", head)
                            errors.append(f"{rel}:{start}: {name.group(1) if name else '?'} is "
                                          f"{i - start + 1} lines (at most {FUNCTION_MAX})")
                        start = None
    return errors


def main(argv):
    if "--help" in argv or "-h" in argv:
        print(__doc__.strip())
        print("\nusage: check_layers.py [--graph] [--calls]")
        return 0
    files = list(sources())
    by_name = {}
    for rel in files:
        by_name.setdefault(os.path.basename(rel), []).append(rel)
    errors, edges = [], {}
    for rel in files:
        mod = module_of(rel)
        text = open(os.path.join(ROOT, rel), encoding="utf-8").read()
        for inc in INCLUDE.findall(text):
            name = os.path.basename(inc)
            here = os.path.join(os.path.dirname(rel), inc)
            if os.path.exists(os.path.join(ROOT, here)):
                target = os.path.normpath(here)
                tmod = module_of(target)
            elif name in GENERATED:
                tmod = GENERATED[name]
            elif len(by_name.get(name, [])) == 1:
                target = by_name[name][0]
                tmod = module_of(target)
            elif name in by_name:
                errors.append(f"{rel}: \"{inc}\" is ambiguous: {', '.join(by_name[name])}")
                continue
            else:
                errors.append(f"{rel}: \"{inc}\" is no file of the tree")
                continue
            edges.setdefault((mod, tmod), set()).add(rel)
            if tmod == mod:
                continue
            if tmod not in ALLOWED[mod]:
                errors.append(f"{rel} ({mod}) includes \"{inc}\" ({tmod}): {mod} may not depend on {tmod}")
            elif EXPORTS[tmod] is not None and name not in EXPORTS[tmod]:
                errors.append(f"{rel} ({mod}) includes \"{inc}\", private to {tmod}")
    errors += floor_errors("--calls" in argv)
    errors += long_functions()
    if "--graph" in argv:
        for (a, b), who in sorted(edges.items()):
            if a != b:
                print(f"{a:7} -> {b:7} ({len(who)} files)")
    for e in errors:
        print("check_layers: " + e, file=sys.stderr)
    if errors:
        print(f"check_layers: {len(errors)} include(s), call(s) or function(s) break the rules", file=sys.stderr)
        return 1
    print(f"check_layers: {len(files)} files, {sum(len(v) for v in edges.values())} include edges between "
          f"{len(set(m for e in edges for m in e))} modules, the files of {len(FLOORS)} wings in their floors, "
          f"no function over {FUNCTION_MAX} lines: as intended")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
