package plan

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/crdvalidation"
	"github.com/dbfleet/dbfleet/pkg/placement"
)

// Fleet is everything a plan needs.
type Fleet struct {
	Databases []dbfleetv1alpha1.DatabaseCluster
	Policies  []dbfleetv1alpha1.PropagationPolicy
	Cluster   []dbfleetv1alpha1.ClusterPropagationPolicy
	Members   []dbfleetv1alpha1.MemberCluster
}

// LoadFiles reads multi-document YAML (or JSON) files and admits every object as the hub's API
// server would create it: the CRDs' own OpenAPI schemas, defaults and CEL rules (see
// pkg/crdvalidation), names and namespaces as DNS names, and no object twice. Objects keep the
// schema defaults the API server fills in. Every problem in every file is reported, each naming
// the file, the document (from 1), the object and the field at fault.
func LoadFiles(ctx context.Context, paths []string) (*Fleet, error) {
	v, err := crdvalidation.BuiltIn()
	if err != nil {
		return nil, fmt.Errorf("load the CRDs hub plan carries: %w", err)
	}
	l := &loader{ctx: ctx, v: v, fleet: &Fleet{}, seen: map[objectKey]string{}}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			l.errs = append(l.errs, err)
			continue
		}
		l.load(path, data)
	}
	if len(l.errs) > 0 {
		return nil, errors.Join(l.errs...)
	}
	return l.fleet, nil
}

// loader collects a fleet and every error met on the way.
type loader struct {
	ctx   context.Context
	v     *crdvalidation.Validator
	fleet *Fleet
	errs  []error
	// seen maps every object read so far to where it was read, to refuse it a second time.
	seen map[objectKey]string
}

type objectKey struct{ kind, namespace, name string }

func (l *loader) load(path string, data []byte) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for doc := 1; ; doc++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return
		}
		where := fmt.Sprintf("%s: document %d", path, doc)
		if err != nil {
			l.errs = append(l.errs, fmt.Errorf("%s: %w", where, err))
			return
		}
		if isOnlyComments(raw) {
			continue
		}
		for _, err := range l.add(where, raw) {
			l.errs = append(l.errs, fmt.Errorf("%s: %w", where, err))
		}
	}
}

// add admits one document and adds it to the fleet, or returns why not.
func (l *loader) add(where string, raw []byte) []error {
	data, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return []error{fmt.Errorf("not YAML: %w", err)}
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(data, &tm); err != nil {
		return []error{fmt.Errorf("not an object: %w", err)}
	}
	if tm.APIVersion != dbfleetv1alpha1.GroupVersion.String() {
		return []error{fmt.Errorf("apiVersion %q: want %s", tm.APIVersion, dbfleetv1alpha1.GroupVersion)}
	}
	var into any
	switch tm.Kind {
	case "DatabaseCluster":
		into = &dbfleetv1alpha1.DatabaseCluster{}
	case "PropagationPolicy":
		into = &dbfleetv1alpha1.PropagationPolicy{}
	case "ClusterPropagationPolicy":
		into = &dbfleetv1alpha1.ClusterPropagationPolicy{}
	case "MemberCluster":
		into = &dbfleetv1alpha1.MemberCluster{}
	default:
		return []error{fmt.Errorf("kind %q: hub plan reads DatabaseCluster, PropagationPolicy, ClusterPropagationPolicy and MemberCluster", tm.Kind)}
	}
	// Fields the type does not have (or has twice) stop the decoding, as they stop the API
	// server's with strict field validation. Values the type cannot hold are left to the schema
	// below, which names their field.
	strictErrs, decodeErr := kjson.UnmarshalStrict(data, into)
	if len(strictErrs) > 0 {
		return strictErrs
	}

	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return []error{fmt.Errorf("not an object: %w", err)}
	}
	namespaced, _ := l.v.Namespaced(tm.Kind)
	if namespaced && u.GetNamespace() == "" {
		u.SetNamespace("default") // as kubectl does without -n
	}
	name := tm.Kind + " " + u.GetName()
	if namespaced {
		name = tm.Kind + " " + u.GetNamespace() + "/" + u.GetName()
	}
	if fieldErrs := l.v.Admit(l.ctx, u); len(fieldErrs) > 0 {
		errs := make([]error, len(fieldErrs))
		for i, fe := range fieldErrs {
			errs[i] = fmt.Errorf("%s: %w", name, fe)
		}
		return errs
	}

	if decodeErr != nil {
		return []error{fmt.Errorf("%s: %w", name, decodeErr)}
	}

	key := objectKey{tm.Kind, u.GetNamespace(), u.GetName()}
	if first, dup := l.seen[key]; dup {
		return []error{fmt.Errorf("%s: metadata.name: Duplicate value: %q: the same object is already in %s", name, u.GetName(), first)}
	}
	l.seen[key] = where

	// The object as admitted, with the defaults the API server fills in.
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		return []error{fmt.Errorf("%s: %w", name, err)}
	}
	switch obj := into.(type) {
	case *dbfleetv1alpha1.DatabaseCluster:
		l.fleet.Databases = append(l.fleet.Databases, *obj)
	case *dbfleetv1alpha1.PropagationPolicy:
		if err := checkPolicy(&obj.Spec); err != nil {
			return []error{fmt.Errorf("%s: %w", name, err)}
		}
		l.fleet.Policies = append(l.fleet.Policies, *obj)
	case *dbfleetv1alpha1.ClusterPropagationPolicy:
		if err := checkPolicy(&obj.Spec); err != nil {
			return []error{fmt.Errorf("%s: %w", name, err)}
		}
		l.fleet.Cluster = append(l.fleet.Cluster, *obj)
	case *dbfleetv1alpha1.MemberCluster:
		l.fleet.Members = append(l.fleet.Members, *obj)
	}
	return nil
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

// checkPolicy applies the placement engine's own checks, beyond admission's: a placement the
// engine refuses leaves every DatabaseCluster of the policy unscheduled.
func checkPolicy(spec *dbfleetv1alpha1.PropagationSpec) error {
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
