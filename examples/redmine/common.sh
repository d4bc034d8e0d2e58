# common.sh: what setup, serve and stop agree on; sourced, not run.
#
#   RUBY              the Ruby that serves (default: ruby); its realpath names its bundle
#   REDMINE_INSTANCE  the instance's name (default: tracer): /var/lib/redmine/NAME, which is
#                     where Debian's Redmine looks for it (/usr/share/redmine/instances/NAME)
#   REDMINE_USER      the user that owns the instance and that the workers run as (default:
#                     www-data when run as root, else yourself)
# shellcheck shell=bash
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
REDMINE=/usr/share/redmine
NAME=${REDMINE_INSTANCE:-tracer}
INSTANCE=/var/lib/redmine/$NAME
if [ "$(id -u)" = 0 ]; then
	SERVE_USER=${REDMINE_USER:-www-data}
else
	SERVE_USER=${REDMINE_USER:-$(id -un)}
fi

say() { printf '%s: %s\n' "$(basename "$0")" "$*" >&2; }
die() { say "$*"; exit 1; }

ruby_bin() {
	local r
	r=$(command -v "${RUBY:-ruby}") || die "no Ruby '${RUBY:-ruby}' in PATH"
	readlink -f "$r"
}

# Each Ruby has its own Gemfile and Gemfile.lock in the instance (Debian's one lock, made by
# redmine's postinst with the release's default Ruby, does not fit another Ruby's default
# gems); its name: the version, and a digest of where that Ruby is.
ruby_key() {
	local r
	r=$(ruby_bin)
	printf '%s-%s' "$("$r" -e 'print RUBY_VERSION')" "$(printf '%s' "$r" | md5sum | cut -c1-8)"
}

# The environment a Redmine process of this instance runs with: the instance, the bundle of
# this Ruby, and what the Ruby under test needs from the caller's environment (make
# test-rubies gives 3.4 its gems through GEM_PATH and RUBYLIB, and YJIT through RUBY_YJIT_ENABLE).
redmine_env() {
	local gems=$INSTANCE/gems/$(ruby_key) v
	printf '%s\n' "REDMINE_INSTANCE=$NAME" RAILS_ENV=production "BUNDLE_GEMFILE=$gems/Gemfile" \
		"HOME=$INSTANCE/tmp" LANG=C.UTF-8
	for v in GEM_PATH GEM_HOME RUBYLIB RUBY_YJIT_ENABLE; do
		[ -n "${!v:-}" ] && printf '%s\n' "$v=${!v}"
	done
	return 0
}

# A command as the serving user, from /usr/share/redmine, in the instance's environment only.
as_user() {
	local envs
	mapfile -t envs < <(redmine_env)
	if [ "$(id -u)" = 0 ] && [ "$SERVE_USER" != root ]; then
		(cd "$REDMINE" && setpriv --reuid="$SERVE_USER" --regid="$(id -gn "$SERVE_USER")" --init-groups \
			env -i PATH=/usr/local/bin:/usr/bin:/bin "${envs[@]}" "$@")
	else
		(cd "$REDMINE" && env -i PATH=/usr/local/bin:/usr/bin:/bin "${envs[@]}" "$@")
	fi
}

# Where serve keeps what one server needs (apache.conf, pids, Apache's and Passenger's logs).
# As root, a directory of root's: Apache and Passenger run as root and must read nothing the
# serving user could change.
run_dir() {
	if [ "$(id -u)" = 0 ]; then
		echo "/run/tracer-redmine/$NAME-$1"
	else
		echo "$INSTANCE/run/$1"
	fi
}

# The workers of the server on port $1: Passenger titles them with the app group's name.
worker_pids() { { pgrep -f "^Passenger RubyApp: tracer-redmine-$1( |\$)" || true; } | sort -n | tr '\n' ' '; }
