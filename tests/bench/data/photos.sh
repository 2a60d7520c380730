#!/bin/bash
# photos.sh: the real-JPEG set of the input-pipeline benchmarks
# (tests/bench/data/run.sh, tests/bench/python/loader.sh):
#   bash tests/bench/data/photos.sh WORKDIR
# makes WORKDIR/photos, the JPEGs of Debian's opencv-doc and python3-sklearn
# at their original sizes, one class folder per source directory (the
# layout torus-pack and torchvision's ImageFolder both read), and prints
# "# N JPEGs, M MB". Files that are not JPEGs (opencv-doc has PNGs named
# .jpg) are left out. A WORKDIR/photos that exists is kept as it is.
# It installs the Debian packages it needs (as root) or names them.
set -euo pipefail
W=${1:?usage: photos.sh WORKDIR}
need=()
[ -d /usr/share/doc/opencv-doc ] || need+=(opencv-doc)
[ -d /usr/lib/python3/dist-packages/sklearn/datasets/images ] || need+=(python3-sklearn)
/usr/bin/python3 -c 'import torch, torchvision, PIL' 2>/dev/null || need+=(python3-torch python3-torchvision python3-pil)
if [ ${#need[@]} -gt 0 ]; then
    echo "# installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null ||
        { echo "photos.sh: needs the Debian packages ${need[*]} (apt-get install them as root)" >&2; exit 2; }
fi
if [ ! -d "$W/photos" ]; then
    mkdir -p "$W/photos.tmp"
    find /usr/share/doc/opencv-doc /usr/lib/python3/dist-packages/sklearn/datasets/images -iname '*.jpg' |
    while read -r f; do
        [ "$(head -c 2 "$f" | od -An -tx1 | tr -d ' ')" = ffd8 ] || continue
        c=$(basename "$(dirname "$f")")
        mkdir -p "$W/photos.tmp/$c"
        cp "$f" "$W/photos.tmp/$c/$(echo "$f" | md5sum | cut -c1-8)_$(basename "$f")"
    done
    mv "$W/photos.tmp" "$W/photos"
fi
echo "# $(find "$W/photos" -type f | wc -l) JPEGs, $(du -sm "$W/photos" | cut -f1) MB"
