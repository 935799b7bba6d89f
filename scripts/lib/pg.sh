# scripts/lib/pg.sh, sourced by the scripts: which PostgreSQL installation
# they use.  shardext builds and runs on PostgreSQL 15 to 19.
#
#   pg_parse_args "$@"   takes a leading "--pg N" (or --pg=N) off the arguments
#                        and selects PostgreSQL N; the other arguments are left
#                        in PG_ARGS
#   pg_select N          PG_CONFIG := the pg_config of PostgreSQL N:
#                        /usr/lib/postgresql/N/bin/pg_config (Debian's packages),
#                        else ${SHARDEXT_PG_ROOT:-/opt/pg}/N/bin/pg_config (where
#                        an archive pg-N.tar.xz of ../shared/pg is unpacked)
#   pg_find N            prints the pg_config pg_select would take, or fails
#   pg_major             the major version of PG_CONFIG ("15", "18" ...)
#
# Without --pg, PG_CONFIG from the environment is used, else PostgreSQL 15's.
# Every script exports the result, so that what it runs uses the same one.
# The installation's own libpq goes first in LD_LIBRARY_PATH: the client
# programs of an unpacked archive (psql, pg_ctl, pgbench, the isolation
# tester) would otherwise load the system's libpq, of another version, and
# the servers they start get the same environment.  (shardext.so itself is
# linked with the installation's library directory as its run path.)

pg_find() {
	local version=$1 root=${SHARDEXT_PG_ROOT:-/opt/pg}
	if [ -x "/usr/lib/postgresql/$version/bin/pg_config" ]; then
		echo "/usr/lib/postgresql/$version/bin/pg_config"
	elif [ -x "$root/$version/bin/pg_config" ]; then
		echo "$root/$version/bin/pg_config"
	else
		return 1
	fi
}

pg_select() {
	local version=$1 root=${SHARDEXT_PG_ROOT:-/opt/pg}
	if ! [[ "$version" =~ ^[0-9]+$ ]]; then
		echo "--pg takes a major version of PostgreSQL (15 ... 19), not \"$version\"" >&2
		exit 2
	fi
	if ! PG_CONFIG=$(pg_find "$version"); then
		echo "PostgreSQL $version not found: neither /usr/lib/postgresql/$version/bin/pg_config" \
			"(Debian: apt-get install postgresql-$version postgresql-server-dev-$version) nor" \
			"$root/$version/bin/pg_config (unpack pg-$version.tar.xz into $root, or set" \
			"SHARDEXT_PG_ROOT) exists" >&2
		exit 2
	fi
	export PG_CONFIG
}

pg_parse_args() {
	PG_ARGS=()
	while [ $# -gt 0 ]; do
		case "$1" in
			--pg)
				[ $# -ge 2 ] || { echo "--pg needs a version (15 ... 19)" >&2; exit 2; }
				pg_select "$2"
				shift 2
				;;
			--pg=*)
				pg_select "${1#--pg=}"
				shift
				;;
			*) break ;;
		esac
	done
	PG_ARGS=("$@")
	if [ -z "${PG_CONFIG:-}" ]; then
		if [ -x /usr/lib/postgresql/15/bin/pg_config ]; then
			PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config
		else
			PG_CONFIG=pg_config
		fi
	fi
	if ! "$PG_CONFIG" --version >/dev/null 2>&1; then
		echo "no PostgreSQL at PG_CONFIG=$PG_CONFIG (use --pg N or set PG_CONFIG)" >&2
		exit 2
	fi
	export PG_CONFIG
	pg_use_libdir
}

pg_use_libdir() {
	local libdir
	libdir=$("$PG_CONFIG" --libdir)
	if [ -e "$libdir/libpq.so.5" ] && [[ ":${LD_LIBRARY_PATH:-}:" != *":$libdir:"* ]]; then
		export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	fi
}

pg_major() {
	"$PG_CONFIG" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/'
}
