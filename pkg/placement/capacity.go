package placement

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dbfleet/dbfleet/api/v1alpha1"
)

// AvailableReplicas is how many more replicas requesting `requests` each fit into a member with
// this resource summary: the minimum over the requested resources of
// floor((allocatable - allocated) / request). It returns limited=false when nothing is requested,
// because then capacity does not limit placement. A member that has not reported a summary yet,
// or lacks a requested resource, can take none: capacity that is unknown is not assumed.
func AvailableReplicas(summary *v1alpha1.ResourceSummary, requests corev1.ResourceList) (replicas int32, limited bool) {
	best := int64(math.MaxInt32)
	for name, request := range requests {
		if request.Sign() <= 0 {
			continue
		}
		limited = true
		if summary == nil {
			return 0, true
		}
		allocatable, ok := summary.Allocatable[name]
		if !ok {
			return 0, true
		}
		allocated := summary.Allocated[name] // a missing entry is a zero Quantity
		if n := fitting(allocatable, allocated, request); n < best {
			best = n
		}
	}
	if !limited {
		return 0, false
	}
	return int32(best), true
}

// fitting is floor((allocatable - allocated) / request), never negative. It works in milli-units
// so fractional CPU requests divide exactly, and falls back to whole units for quantities too large
// for milli-units in an int64 (exabytes of memory).
func fitting(allocatable, allocated, request resource.Quantity) int64 {
	const milliLimit = math.MaxInt64 / 1000
	scale := func(q resource.Quantity) int64 { return q.MilliValue() }
	if allocatable.Value() > milliLimit || allocated.Value() > milliLimit || request.Value() > milliLimit {
		scale = func(q resource.Quantity) int64 { return q.Value() }
	}
	free := scale(allocatable) - scale(allocated)
	per := scale(request)
	if free <= 0 || per <= 0 {
		return 0
	}
	return free / per
}
