"""Pieces shared by the fake compiler scripts of the build and static-tier tests."""

# nvcc's dependency pass (-M -MF FILE), as the fakes answer it: follow #include "..." from the
# including file's folder, then from the -I folders, and write the make rule nvcc writes.
DEPENDENCY_PASS = """\
    import re
    search = [a[2:] for a in args if a.startswith("-I")]
    seen = []
    def visit(path):
        if path in seen:
            return
        seen.append(path)
        for name in re.findall(r'#include\\s+"([^"]+)"', open(path).read()):
            for folder in [os.path.dirname(path), *search]:
                if os.path.isfile(os.path.join(folder, name)):
                    visit(os.path.join(folder, name))
                    break
    visit([a for a in args if a.endswith(".cu")][0])
    with open(args[args.index("-MF") + 1], "w") as f:
        f.write("deps : " + " \\\\\\n  ".join(seen) + "\\n")
    sys.exit(0)
"""
