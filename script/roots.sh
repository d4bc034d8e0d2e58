# shellcheck shell=bash
# roots.sh: Debian roots made with debootstrap and commands run inside them, for script/rubies
# and script/fresh (sourced by bash; each defines say and die first). Needs root.

# The first Debian mirror this machine's apt uses (never a name written here).
mirror() {
	local m
	m=$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' |
		grep -v -- '-security' | grep -m1 debian || true)
	[ -n "$m" ] || m=$(grep -hE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
		awk '{print $2}' | grep -v -- '-security' | grep -m1 debian || true)
	[ -n "$m" ] || die "no Debian mirror in /etc/apt/sources.list.d or /etc/apt/sources.list"
	echo "$m"
}

# The root sees this machine's devices and resolves names as this machine does.
mounted=()
mount_root() {
	local r=$1 d
	for d in proc sys dev dev/pts dev/shm; do
		mkdir -p "$r/$d"
		mountpoint -q "$r/$d" && continue
		mount --bind "/$d" "$r/$d"
		mounted+=("$r/$d")
	done
	cp /etc/resolv.conf "$r/etc/resolv.conf"
}

unmount_all() {
	local i
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
	mounted=()
}

# A command in root r. Not chroot: a chrooted process may not make user namespaces, and its
# "/" is no mount point, so `unshare --mount` fails there (the namespace tests do both). In a
# mount namespace of its own, r becomes the real root (pivot_root) and this machine's is let go.
in_root() {
	local r=$1
	shift
	if [ "$r" = / ]; then
		(cd / && env "$@")
	else
		unshare --mount --propagation private -- /bin/sh -ec '
			r=$1; shift
			mount --rbind "$r" "$r"
			cd "$r"
			mkdir -p .tracer-host
			pivot_root . .tracer-host
			cd /
			umount -l /.tracer-host
			exec /usr/bin/env -i HOME=/root PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin \
				LANG=C.UTF-8 "$@"' sh "$r" "$@"
	fi
}

# A clean copy of the working tree (what git tracks or would track, no build output) in dst.
# keep: a directory under it that survives from one copy to the next (test/export/node_modules).
copy_tree() {
	local dst=$1 keep=${2:-}
	if [ -n "$keep" ] && [ -d "$dst/$keep" ]; then
		rm -rf "$dst.keep" && mkdir -p "$dst.keep" && mv "$dst/$keep" "$dst.keep/"
	fi
	rm -rf "$dst" && mkdir -p "$dst"
	git ls-files -co --exclude-standard -z | grep -zv -e '\.so$' -e '^test/export/node_modules/' |
		tar --null -cf - -T - | tar -xf - -C "$dst"
	if [ -n "$keep" ] && [ -d "$dst.keep/${keep##*/}" ]; then
		mv "$dst.keep/${keep##*/}" "$dst/$keep"
	fi
	return 0
}
