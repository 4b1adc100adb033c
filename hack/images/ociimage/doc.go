// Package ociimage builds single-layer container images from files of this machine and writes
// them as OCI image archives that containerd imports (`ctr -n k8s.io images import`), without
// Docker or a registry: the local federation's nodes load the images they run from them.
package ociimage
