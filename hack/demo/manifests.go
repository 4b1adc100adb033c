package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/dbfleet/dbfleet/hack/localfed/layout"
)

// The demo's objects, written to .localfed/demo/ so the user can read and reapply them.

const (
	demoNamespace     = "demo"
	demoDatabase      = "orders"
	demoPolicy        = "demo-spread"
	demoReplicas      = 3
	tolerationSeconds = 10
)

// policyYAML divides the replicas by static weight, every member 1.
func policyYAML(members []string) string {
	var weights strings.Builder
	fmt.Fprintf(&weights, "          - targetCluster:\n              clusterNames: [%s]\n            weight: 1\n", strings.Join(members, ", "))
	return fmt.Sprintf(`# Spread the demo's databases over the members by static weight, and move a member's
# replicas away 10 s after the hub marks it unreachable.
apiVersion: dbfleet.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: %s
spec:
  resourceSelectors:
    - labelSelector:
        matchLabels:
          app.kubernetes.io/part-of: dbfleet-demo
  placement:
    clusterTolerations:
      - key: dbfleet.io/unreachable
        operator: Exists
        effect: NoExecute
        tolerationSeconds: %d
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
%s`, demoPolicy, tolerationSeconds, weights.String())
}

// databaseYAML is a small PostgreSQL 15 of demoReplicas instances whose primary prefers the first
// member. No spec.image: the agent runs postgres:15, which make images built from this machine's
// PostgreSQL packages and localfed imported into every node.
func databaseYAML(primary string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %s
---
# Three PostgreSQL 15 instances, one per member; the primary prefers %s.
apiVersion: dbfleet.io/v1alpha1
kind: DatabaseCluster
metadata:
  name: %s
  namespace: %s
  labels:
    app.kubernetes.io/part-of: dbfleet-demo
spec:
  engine: postgres
  version: "15"
  replicas: %d
  storage:
    size: 1Gi
  resources:
    requests:
      cpu: 100m
      memory: 128Mi
  primary:
    preferredClusters: [%s]
    failover: Automatic
`, demoNamespace, primary, demoDatabase, demoNamespace, demoReplicas, primary)
}

// writeManifests writes the demo's YAML files and returns their paths.
func writeManifests(members []string) (policy, database string, err error) {
	dir := fed.Demo()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	policy, database = filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "database.yaml")
	if err := os.WriteFile(policy, []byte(policyYAML(members)), 0o600); err != nil {
		return "", "", err
	}
	return policy, database, os.WriteFile(database, []byte(databaseYAML(members[0])), 0o600)
}

// kubectl runs kubectl against the hub and echoes the command.
func kubectl(ctx context.Context, args ...string) error {
	args = append([]string{"--kubeconfig", kubeconfig(layout.HubCluster)}, args...)
	say("$ kubectl %s", strings.Join(args, " "))
	out, err := exec.CommandContext(ctx, "kubectl", args...).CombinedOutput()
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		if line != "" {
			say("  %s", line)
		}
	}
	if err != nil {
		return fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return nil
}
