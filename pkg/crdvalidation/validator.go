package crdvalidation

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/dbfleet/dbfleet/deploy/crds"
)

// Validator admits objects of the kinds its CRDs define. It is safe for concurrent use.
type Validator struct {
	kinds map[string]*kind
}

// kind is what the API server builds from one CRD version to serve it.
type kind struct {
	gvk        schema.GroupVersionKind
	namespaced bool
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	// cel is nil when the schema has no x-kubernetes-validations.
	cel *cel.Validator
	// status* are the same for the status schema alone, as the status subresource uses it; nil
	// without a status.
	statusStructural *structuralschema.Structural
	statusSchema     apiservervalidation.SchemaValidator
	statusCEL        *cel.Validator
}

var builtIn = sync.OnceValues(func() (*Validator, error) { return New(crds.Files) })

// BuiltIn returns the Validator of the CRDs carried in the binary (deploy/crds). It is built once;
// building compiles every CEL rule.
func BuiltIn() (*Validator, error) { return builtIn() }

// New builds a Validator from the CRD manifests (*.yaml) at the top of files.
func New(files fs.FS) (*Validator, error) {
	paths, err := fs.Glob(files, "*.yaml")
	if err != nil {
		return nil, err
	}
	v := &Validator{kinds: map[string]*kind{}}
	for _, path := range paths {
		data, err := fs.ReadFile(files, path)
		if err != nil {
			return nil, err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			continue
		}
		k, err := newKind(&crd)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		v.kinds[k.gvk.Kind] = k
	}
	if len(v.kinds) == 0 {
		return nil, fmt.Errorf("no CustomResourceDefinitions among %v", paths)
	}
	return v, nil
}

// newKind builds the validators of the CRD's storage version as the custom resource handler does.
func newKind(crd *apiextensionsv1.CustomResourceDefinition) (*kind, error) {
	i := slices.IndexFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Storage })
	if i < 0 {
		return nil, fmt.Errorf("CRD %s has no storage version", crd.Name)
	}
	version := &crd.Spec.Versions[i]
	if version.Schema == nil || version.Schema.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("CRD %s version %s has no schema", crd.Name, version.Name)
	}
	internal := &apiextensions.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(version.Schema, internal, nil); err != nil {
		return nil, fmt.Errorf("convert the schema of %s: %w", crd.Name, err)
	}
	s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("the schema of %s is not structural: %w", crd.Name, err)
	}
	s = s.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(s); err != nil {
		return nil, fmt.Errorf("prune the defaults of %s: %w", crd.Name, err)
	}
	sv, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("the schema validator of %s: %w", crd.Name, err)
	}
	k := &kind{
		gvk:        schema.GroupVersionKind{Group: crd.Spec.Group, Version: version.Name, Kind: crd.Spec.Names.Kind},
		namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
		structural: s,
		schema:     sv,
		cel:        cel.NewValidator(s, true, celconfig.PerCallLimit),
	}
	if statusProps, ok := internal.OpenAPIV3Schema.Properties["status"]; ok {
		statusStructural := s.Properties["status"]
		k.statusStructural = &statusStructural
		if k.statusSchema, _, err = apiservervalidation.NewSchemaValidator(&statusProps); err != nil {
			return nil, fmt.Errorf("the status schema validator of %s: %w", crd.Name, err)
		}
		k.statusCEL = cel.NewValidator(k.statusStructural, false, celconfig.PerCallLimit)
	}
	return k, nil
}

// Kinds lists the kinds the Validator knows, sorted.
func (v *Validator) Kinds() []string {
	out := make([]string, 0, len(v.kinds))
	for k := range v.kinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Namespaced reports whether kind is namespaced, and whether the Validator knows it.
func (v *Validator) Namespaced(kindName string) (namespaced, known bool) {
	k, ok := v.kinds[kindName]
	if !ok {
		return false, false
	}
	return k.namespaced, true
}

// Admit checks obj as the API server checks a create of it, status included, and returns every
// error with its field path. It changes obj as admission would: unknown fields are pruned (and
// reported), schema defaults are filled in, and a cluster-scoped object loses any namespace. A
// namespaced object must carry its namespace, as it gets from the request's.
func (v *Validator) Admit(ctx context.Context, obj *unstructured.Unstructured) field.ErrorList {
	k, ok := v.kinds[obj.GetKind()]
	if !ok {
		return field.ErrorList{field.NotSupported(field.NewPath("kind"), obj.GetKind(), v.Kinds())}
	}
	if want := k.gvk.GroupVersion().String(); obj.GetAPIVersion() != want {
		return field.ErrorList{field.Invalid(field.NewPath("apiVersion"), obj.GetAPIVersion(), "must be "+want)}
	}

	// Decoding: prune what the schema does not know (strict field validation refuses it), drop
	// nulls, coerce metadata, fill in defaults.
	var errs field.ErrorList
	unknown := structuralpruning.PruneWithOptions(obj.Object, k.structural, true,
		structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	for _, path := range unknown {
		errs = append(errs, &field.Error{Type: field.ErrorTypeForbidden, Field: path, BadValue: "", Detail: "unknown field"})
	}
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj.Object, k.structural)
	if err := schemaobjectmeta.Coerce(nil, obj.Object, k.structural, true, false); err != nil {
		return append(errs, err)
	}
	structuraldefaulting.Default(obj.Object, k.structural)
	if !k.namespaced {
		obj.SetNamespace("") // the API server clears it on a cluster-scoped create
	}

	// The strategy's Validate: metadata, schema, embedded objects, list types, then CEL unless a
	// blocking error makes the rules meaningless.
	errs = append(errs, validation.ValidateObjectMetaAccessor(obj, k.namespaced, validation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj.UnstructuredContent(), k.schema)...)
	errs = append(errs, schemaobjectmeta.Validate(nil, obj.Object, k.structural, false)...)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, k.structural, obj.Object)...)
	if k.cel != nil {
		if blocking(errs) {
			errs = append(errs, field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"))
		} else {
			celErrs, _ := k.cel.Validate(ctx, nil, k.structural, obj.Object, nil, celconfig.RuntimeCELCostBudget)
			errs = append(errs, celErrs...)
		}
	}
	return errs
}

// AdmitStatus checks status, the status of an object of kindName, as the API server checks a
// status update: against the status schema and its CEL rules (the rest of the object is not
// written by a status update). Field paths start at status.
func (v *Validator) AdmitStatus(ctx context.Context, kindName string, status map[string]any) field.ErrorList {
	k, ok := v.kinds[kindName]
	if !ok {
		return field.ErrorList{field.NotSupported(field.NewPath("kind"), kindName, v.Kinds())}
	}
	path := field.NewPath("status")
	if k.statusSchema == nil {
		return field.ErrorList{field.Forbidden(path, kindName+" has no status")}
	}
	errs := apiservervalidation.ValidateCustomResource(path, status, k.statusSchema)
	errs = append(errs, listtype.ValidateListSetsAndMaps(path, k.statusStructural, status)...)
	if k.statusCEL != nil && !blocking(errs) {
		celErrs, _ := k.statusCEL.Validate(ctx, path, k.statusStructural, status, nil, celconfig.RuntimeCELCostBudget)
		errs = append(errs, celErrs...)
	}
	return errs
}

// blocking is the API server's rule for skipping CEL: the rules may assume what these errors deny.
func blocking(errs field.ErrorList) bool {
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong,
			field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true
		}
	}
	return false
}

// Format writes errs one per line, each with its field path, indented by prefix.
func Format(errs field.ErrorList, prefix string) string {
	lines := make([]string, len(errs))
	for i, err := range errs {
		lines[i] = prefix + err.Error()
	}
	return strings.Join(lines, "\n")
}
