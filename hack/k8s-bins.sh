#!/usr/bin/env bash
# Builds the real Kubernetes binaries that tests and the demo run (kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, etcd, kwok; and versitygw, the S3 server of the
# local federation) from the Go module proxy, caches them outside the work tree and links them
# into bin/k8s/.
#
# Each binary is built from a tools module under hack/tools/ so the project's own go.mod never
# pulls in k8s.io/kubernetes. The cache is keyed by the tools module's go.sum, so a second run
# (or a fresh clone on the same machine) does nothing, while a version bump rebuilds.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${DBFLEET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dbfleet}/k8s-bins"
out="$root/bin/k8s"
mkdir -p "$cache" "$out"

# The progress ticker of a build in flight, stopped however the script ends. The trap must not
# fail under set -e: a failing kill as the last command of an && list made the whole script exit
# 1 after every cold build, once everything was built.
ticker=""
stop_ticker() {
	if [[ -n "$ticker" ]]; then
		kill "$ticker" 2>/dev/null || true
		ticker=""
	fi
}
trap stop_ticker EXIT

log() { printf '[k8s-bins %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# The Kubernetes binaries report their version from ldflags, as the release build sets them.
k8s_version="$(cd "$root/hack/tools/k8s" && go list -m -f '{{.Version}}' k8s.io/kubernetes)"
k8s_minor="$(echo "$k8s_version" | cut -d. -f2)"
k8s_ldflags="-X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$k8s_minor -X k8s.io/component-base/version.gitTreeState=clean"

# build NAME TOOLSDIR PACKAGE [LDFLAGS]: builds PACKAGE in hack/tools/TOOLSDIR into the cache as NAME.
build() {
	local name="$1" dir="$root/hack/tools/$2" pkg="$3" ldflags="${4:-}"
	local key
	key="$( (cat "$dir/go.mod" "$dir/go.sum"; echo "$ldflags") | sha256sum | cut -c1-16)"
	local target="$cache/$name-$key"
	if [[ -x "$target" ]]; then
		log "$name: cached ($target)"
	else
		log "$name: building $pkg (cold, the Kubernetes binaries take about 11 minutes on 2 cores; with a warm Go build cache well under one)"
		local start=$SECONDS
		# go build prints nothing for minutes: say it is still at work.
		( while sleep 30; do log "$name: still building ($((SECONDS - start))s)"; done ) &
		ticker=$!
		# Build into a temporary name first so an interrupted build never looks cached.
		if ! (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$target.tmp" "$pkg"); then
			stop_ticker
			log "$name: build failed"
			return 1
		fi
		stop_ticker
		mv "$target.tmp" "$target"
		log "$name: built in $((SECONDS - start))s"
		# Older builds of the same binary are dead weight, except the one before this: another
		# work tree of this machine on the previous version still links to it.
		find "$cache" -maxdepth 1 -name "$name-*" ! -name "*.tmp" -printf '%T@ %p\n' | sort -rn | tail -n +3 | cut -d' ' -f2- | xargs -r rm -f
	fi
	ln -sfn "$target" "$out/$name"
}

build etcd etcd go.etcd.io/etcd/server/v3
build kwok kwok sigs.k8s.io/kwok/cmd/kwok
build kube-apiserver k8s k8s.io/kubernetes/cmd/kube-apiserver "$k8s_ldflags"
build kube-controller-manager k8s k8s.io/kubernetes/cmd/kube-controller-manager "$k8s_ldflags"
build kube-scheduler k8s k8s.io/kubernetes/cmd/kube-scheduler "$k8s_ldflags"
# The real member nodes of hack/localfed (docs/localfed.md) run kubelet against containerd.
build kubelet k8s k8s.io/kubernetes/cmd/kubelet "$k8s_ldflags"
# The object store of hack/localfed, where backups go: the Versity S3 gateway.
build versitygw versitygw github.com/versity/versitygw/cmd/versitygw

# kwok's stage files (fake nodes become Ready, pods become Running/Ready) come from its module.
kwokdir="$(cd "$root/hack/tools/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)"
stages="$out/kwok-stages.yaml"
if [[ ! -s "$stages" ]]; then
	{
		for f in "$kwokdir"/kustomize/stage/node/fast/node-initialize.yaml \
			"$kwokdir"/kustomize/stage/node/heartbeat/node-heartbeat.yaml \
			"$kwokdir"/kustomize/stage/pod/fast/*.yaml; do
			echo '---'
			cat "$f"
		done
	} >"$stages.tmp"
	mv "$stages.tmp" "$stages"
fi
log "ready: $out"
