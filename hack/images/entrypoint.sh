#!/bin/sh
# The entrypoint of dbfleet's local postgres image (hack/images), for pods that run the image as
# it is (no dbfleet-instance): on the first start it initialises PGDATA (POSTGRES_USER, default
# postgres; POSTGRES_PASSWORD, else trust, as POSTGRES_HOST_AUTH_METHOD=trust would), then runs
# postgres as uid 999, listening on every address.
set -e
if [ "${1#-}" != "$1" ]; then
	set -- postgres "$@"
fi
if [ "$1" != postgres ]; then
	exec "$@"
fi
shift
: "${PGDATA:=/var/lib/postgresql/data}"
if [ "$(id -u)" = 0 ]; then
	mkdir -p "$PGDATA"
	chown 999:999 "$PGDATA"
	chmod 700 "$PGDATA"
	set -- setpriv --reuid=999 --regid=999 --clear-groups "$0" postgres "$@"
	exec "$@"
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
	auth=trust
	pwfile=/tmp/.initdb-pwfile.$$
	if [ -n "$POSTGRES_PASSWORD" ]; then
		auth=scram-sha-256
		(umask 077 && printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile")
		initdb -D "$PGDATA" --username="${POSTGRES_USER:-postgres}" --pwfile="$pwfile" --auth-local=trust --auth-host=$auth --encoding=UTF8 --locale=C
		rm -f "$pwfile"
	else
		echo "entrypoint: no POSTGRES_PASSWORD: every host may connect without a password (trust)" >&2
		initdb -D "$PGDATA" --username="${POSTGRES_USER:-postgres}" --auth-local=trust --auth-host=trust --encoding=UTF8 --locale=C
	fi
	printf 'host all all all %s\nhost replication all all %s\n' "$auth" "$auth" >>"$PGDATA/pg_hba.conf"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
