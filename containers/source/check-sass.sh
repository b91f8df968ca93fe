#!/bin/sh
# check-sass.sh TOP LISTING SM...: every shared object and cubin under TOP that holds device code must hold SASS
# (an ELF in `cuobjdump --list-elf`) for each SM given (sm_121a ...): PTX alone would be JIT-compiled by the driver,
# which the images refuse (CUDA_DISABLE_PTX_JIT). Writes every file's ELF and PTX listing to LISTING; prints one
# "source-build check:" line per file that lacks an arch (ci/images/source_build.py raises them) and exits 1.
set -eu
top=$1 listing=$2
shift 2
nvcc=$(nvcc --version) cuobjdump=$(cuobjdump --version)  # either failing to run stops here, not as "no device code"
printf 'nvcc: %s\ncuobjdump: %s\nrequested SASS: %s\n' "$(echo "$nvcc" | grep release)" \
    "$(echo "$cuobjdump" | grep release)" "$*" > "$listing"
found=0 failed=0
IFS='
'  # one file a line: names may hold spaces
for f in $(find "$top" -type f \( -name '*.so' -o -name '*.so.*' -o -name '*.cubin' \) | LC_ALL=C sort); do
    rel=${f#"$top"/}
    elf=$(cuobjdump --list-elf "$f" 2>/dev/null || true)
    ptx=$(cuobjdump --list-ptx "$f" 2>/dev/null || true)
    if [ -z "$elf$ptx" ]; then
        echo "== $rel: no device code" >> "$listing"
        continue
    fi
    found=$((found + 1))
    printf '== %s\n%s\n%s\n' "$rel" "$elf" "$ptx" | sed '/^$/d' >> "$listing"
    for sm in "$@"; do
        if ! printf '%s\n' "$elf" | grep -q "[.]$sm[.]cubin\$"; then
            has=$(printf '%s\n' "$elf" | grep -o 'sm_[0-9]*[af]\?' | LC_ALL=C sort -u | paste -s -d ' ' -)
            echo "source-build check: $rel: no SASS for $sm (ELF: ${has:-none}; PTX entries: $(printf '%s' "$ptx" \
                | grep -c . || true))"
            failed=1
        fi
    done
done
if [ "$found" = 0 ]; then
    echo "source-build check: no shared object or cubin with device code under $top"
    exit 1
fi
exit "$failed"
