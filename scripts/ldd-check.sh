#!/usr/bin/env bash
# Every shared library that each given extension needs resolves (ldd prints no "not found"); run inside the
# images' build steps (Dockerfile) and by tests/integration/test_image_integration.py on the built image.
#   ldd-check.sh FILE.so...    LDD_ALLOW="libcuda.so.1 ..." names libraries that may be missing here (the
#                              CUDA driver's, which the container runtime mounts on a GPU node);
#                              LDD_LIBRARY_PATH=DIR:... the folders of libraries the framework has loaded
#                              before it loads the extension (Horovod's TensorFlow library needs
#                              libtensorflow_framework.so.2 without a RUNPATH to it: `import tensorflow`
#                              loads it first), searched as LD_LIBRARY_PATH for this check only
# Exit 1 naming each unresolved library and the file that needs it.
set -euo pipefail
[ $# -gt 0 ] || { echo "ldd-check.sh: no files given" >&2; exit 2; }
status=0
for so in "$@"; do
  [ -f "$so" ] || { echo "ldd-check.sh: $so: no such file" >&2; status=1; continue; }
  out="$(LD_LIBRARY_PATH="${LDD_LIBRARY_PATH:-}" ldd "$so" 2>&1)" || { echo "ldd-check.sh: ldd $so failed: $out" >&2; status=1; continue; }
  missing=0
  while read -r lib _; do
    case " ${LDD_ALLOW:-} " in *" $lib "*) continue ;; esac
    echo "ldd-check.sh: $so: $lib not found" >&2
    missing=1
  done < <(grep 'not found' <<<"$out" || true)
  if [ "$missing" = 0 ]; then echo "ldd-check.sh: $so: every library resolves"; else status=1; fi
done
exit "$status"
