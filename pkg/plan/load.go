package plan

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/placement"
)

// Fleet is everything a plan needs.
type Fleet struct {
	Databases []dbfleetv1alpha1.DatabaseCluster
	Policies  []dbfleetv1alpha1.PropagationPolicy
	Cluster   []dbfleetv1alpha1.ClusterPropagationPolicy
	Members   []dbfleetv1alpha1.MemberCluster
}

// LoadFiles reads multi-document YAML (or JSON) files. Errors name the file, the document (from
// 1) and the object or field at fault.
func LoadFiles(paths []string) (*Fleet, error) {
	fleet := &Fleet{}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if err := fleet.load(path, data); err != nil {
			return nil, err
		}
	}
	return fleet, nil
}

func (f *Fleet) load(path string, data []byte) error {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for doc := 1; ; doc++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
		if isOnlyComments(raw) {
			continue
		}
		if err := f.add(raw); err != nil {
			return fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
	}
}

func (f *Fleet) add(raw []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(raw, &tm); err != nil {
		return fmt.Errorf("not YAML: %w", err)
	}
	if tm.APIVersion != dbfleetv1alpha1.GroupVersion.String() {
		return fmt.Errorf("apiVersion %q: want %s", tm.APIVersion, dbfleetv1alpha1.GroupVersion)
	}
	switch tm.Kind {
	case "DatabaseCluster":
		var obj dbfleetv1alpha1.DatabaseCluster
		if err := strict(raw, &obj); err != nil {
			return err
		}
		if obj.Namespace == "" {
			obj.Namespace = "default"
		}
		if obj.Spec.Replicas < 1 {
			return fmt.Errorf("DatabaseCluster %s/%s: spec.replicas must be at least 1", obj.Namespace, obj.Name)
		}
		f.Databases = append(f.Databases, obj)
	case "PropagationPolicy":
		var obj dbfleetv1alpha1.PropagationPolicy
		if err := strict(raw, &obj); err != nil {
			return err
		}
		if obj.Namespace == "" {
			obj.Namespace = "default"
		}
		if err := checkPolicy(&obj.Spec); err != nil {
			return fmt.Errorf("PropagationPolicy %s/%s: %w", obj.Namespace, obj.Name, err)
		}
		f.Policies = append(f.Policies, obj)
	case "ClusterPropagationPolicy":
		var obj dbfleetv1alpha1.ClusterPropagationPolicy
		if err := strict(raw, &obj); err != nil {
			return err
		}
		if err := checkPolicy(&obj.Spec); err != nil {
			return fmt.Errorf("ClusterPropagationPolicy %s: %w", obj.Name, err)
		}
		f.Cluster = append(f.Cluster, obj)
	case "MemberCluster":
		var obj dbfleetv1alpha1.MemberCluster
		if err := strict(raw, &obj); err != nil {
			return err
		}
		f.Members = append(f.Members, obj)
	default:
		return fmt.Errorf("kind %q: hub plan reads DatabaseCluster, PropagationPolicy, ClusterPropagationPolicy and MemberCluster", tm.Kind)
	}
	return nil
}

// strict decodes, refusing fields the type does not have (or has twice); the error names each
// such field by its path, as kubectl's strict field validation does.
func strict(raw []byte, into any) error {
	data, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return fmt.Errorf("not YAML: %w", err)
	}
	strictErrs, err := kjson.UnmarshalStrict(data, into)
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}

// LoadHub reads the fleet from a live hub: every DatabaseCluster (or those of one namespace),
// every policy and every MemberCluster, with their real status.
func LoadHub(ctx context.Context, c client.Reader, namespace string) (*Fleet, error) {
	f := &Fleet{}
	dbcs := &dbfleetv1alpha1.DatabaseClusterList{}
	pps := &dbfleetv1alpha1.PropagationPolicyList{}
	cpps := &dbfleetv1alpha1.ClusterPropagationPolicyList{}
	mcs := &dbfleetv1alpha1.MemberClusterList{}
	for _, l := range []struct {
		list client.ObjectList
		opts []client.ListOption
	}{
		{dbcs, []client.ListOption{client.InNamespace(namespace)}},
		{pps, []client.ListOption{client.InNamespace(namespace)}},
		{cpps, nil},
		{mcs, nil},
	} {
		if err := c.List(ctx, l.list, l.opts...); err != nil {
			return nil, fmt.Errorf("read the hub: %w", err)
		}
	}
	f.Databases, f.Policies, f.Cluster, f.Members = dbcs.Items, pps.Items, cpps.Items, mcs.Items
	return f, nil
}

// checkPolicy applies the checks the API server would, where they matter to placement.
func checkPolicy(spec *dbfleetv1alpha1.PropagationSpec) error {
	if len(spec.ResourceSelectors) == 0 {
		return errors.New("spec.resourceSelectors: at least one selector is required")
	}
	if err := placement.Validate(&spec.Placement); err != nil {
		return fmt.Errorf("spec.placement: %w", err)
	}
	return nil
}

// AssumeReady marks MemberClusters that carry no Ready condition (typical of hand-written files)
// as Ready, so a plan of a described fleet does not come out empty.
func (f *Fleet) AssumeReady() {
	for i := range f.Members {
		mc := &f.Members[i]
		if meta.FindStatusCondition(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady) == nil {
			meta.SetStatusCondition(&mc.Status.Conditions, metav1.Condition{
				Type: dbfleetv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "AssumedByPlan",
				Message: "the input gave no status; hub plan assumes the cluster is ready",
			})
		}
	}
}

// isOnlyComments reports a document with nothing but comments and separators.
func isOnlyComments(raw []byte) bool {
	for _, line := range bytes.Split(raw, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' && !bytes.Equal(line, []byte("---")) {
			return false
		}
	}
	return true
}
