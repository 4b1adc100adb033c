package placement

import (
	"errors"
	"math"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/dbfleet/dbfleet/deploy/crds"
)

// TestMaxReplicasIsTheCRDMaximum: the engine's bound and the API server's are the same number.
func TestMaxReplicasIsTheCRDMaximum(t *testing.T) {
	data, err := crds.Files.ReadFile("dbfleet.io_databaseclusters.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema struct {
						Properties map[string]struct {
							Properties map[string]struct {
								Maximum *float64 `json:"maximum"`
							} `json:"properties"`
						} `json:"properties"`
					} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	got := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["replicas"].Maximum
	if got == nil || *got != MaxReplicas {
		t.Fatalf("the CRD's spec.replicas maximum is %v, placement.MaxReplicas %d", got, MaxReplicas)
	}
}

// TestScheduleRefusesReplicasBeyondTheMaximum: replicas the API server refuses are refused at
// once, not divided (int32's maximum used to take 89 s of CPU and wrap the ordinals).
func TestScheduleRefusesReplicasBeyondTheMaximum(t *testing.T) {
	for _, n := range []int32{MaxReplicas + 1, math.MaxInt32} {
		in := Input{Replicas: n, Clusters: []Cluster{{Name: "east", Ready: true, Unlimited: true}}, Placement: staticPlacement(nil)}
		if _, err := Schedule(in); !errors.Is(err, ErrInvalidPlacement) {
			t.Fatalf("replicas %d: err = %v, want ErrInvalidPlacement", n, err)
		}
	}
	in := Input{Replicas: MaxReplicas, Clusters: []Cluster{{Name: "east", Ready: true, Unlimited: true}, {Name: "west", Ready: true, Unlimited: true}}, Placement: staticPlacement(nil)}
	d, err := Schedule(in)
	if err != nil || d.TotalReplicas() != MaxReplicas {
		t.Fatalf("replicas %d: %v, %+v: want them divided", MaxReplicas, err, d.Shares)
	}
	for _, sh := range d.Shares {
		if sh.Ordinals.Start < 0 || sh.Ordinals.Start%OrdinalBlock != 0 {
			t.Errorf("share %+v: want a start at a non-negative multiple of %d", sh, OrdinalBlock)
		}
	}
}
