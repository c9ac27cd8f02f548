#!/bin/sh
# mmdebstrap --extract-hook for the image's base root filesystems (see image/build.py).
#
# The extract variant only unpacks the listed packages and their dependencies: no maintainer
# script runs, so this hook does the little they would have done for a Python-only image, then
# removes what a controller never reads. $1 is the root filesystem being built.
set -eu
root="$1"

# The package inventory a scanner (trivy, grype) reads, as distroless images keep it: one
# control paragraph per package in /var/lib/dpkg/status.d/ (there is no dpkg in the image).
#
# Debian's dependency graph also pulls in tools that only its maintainer scripts use (dpkg via
# readline-common, mawk via base-files, tar via dpkg): their files are removed again, and they
# are not in the inventory.
drop=" dpkg tar mawk "
mkdir -p "$root/var/lib/dpkg/status.d"
for deb in "$root"/var/cache/apt/archives/*.deb; do
    name=$(dpkg-deb --field "$deb" Package)
    case "$drop" in
    *" $name "*)
        dpkg-deb --fsys-tarfile "$deb" | tar -t | while read -r path; do
            target="$root/${path#./}"
            if [ -L "$target" ] || [ -f "$target" ]; then rm -f "$target"; fi
        done
        ;;
    *)
        { dpkg-deb --field "$deb"; echo "Status: install ok installed"; } \
            > "$root/var/lib/dpkg/status.d/$name"
        ;;
    esac
done

# python3-minimal (which would drag in dpkg and tar) is not installed; its one useful file is
# this link.
ln -sf python3.11 "$root/usr/bin/python3"

# root and the unprivileged user the Deployment runs as (65532, as in distroless images).
# Its home is /tmp: the only writable path (an emptyDir in the Deployment).
cat > "$root/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/usr/sbin/nologin
nonroot:x:65532:65532:nonroot:/tmp:/usr/sbin/nologin
PASSWD
cat > "$root/etc/group" <<'GROUP'
root:x:0:
nonroot:x:65532:
GROUP
# Nothing else is writable: base-files makes /var/tmp and /var/lock world-writable and
# /var/local group-writable (staff).
mkdir -p "$root/tmp" "$root/root"
chmod 1777 "$root/tmp"
chmod 0700 "$root/root"
for dir in var/tmp var/lock var/local; do
    if [ -d "$root/$dir" ] && [ ! -L "$root/$dir" ]; then
        chown 0:0 "$root/$dir"
        chmod 0755 "$root/$dir"
    fi
done

# The standard library's bytecode, compiled now: the root filesystem is read-only at run time,
# and compiling the imports on every start would cost about a second. Hash-based and unchecked:
# the tarball's mtimes are clamped (reproducible), which would make timestamp-based .pyc stale.
# -f and no bytecode of the interpreter's own: without them, the modules compileall itself
# imports (encodings, ...) keep the timestamp .pyc its start-up wrote wherever the caller's
# environment lacks PYTHONDONTWRITEBYTECODE, and those go stale in the tarball.
PYTHONDONTWRITEBYTECODE=1 chroot "$root" /usr/bin/python3.11 -m compileall -q -f \
    --invalidation-mode unchecked-hash /usr/lib/python3.11 >/dev/null

# Documentation, manuals, translations: nothing a controller reads. (apt's own files go after
# mmdebstrap's cleanup, in image/build.py.)
rm -rf "$root/usr/share/doc" "$root/usr/share/man" "$root/usr/share/info" \
    "$root/usr/share/locale" "$root/usr/share/lintian" "$root/usr/share/bug" \
    "$root/usr/share/polkit-1" "$root/usr/share/binfmts" "$root/usr/lib/binfmt.d" \
    "$root/lib/systemd" "$root/usr/lib/systemd" "$root/usr/lib/python3.11/test"
