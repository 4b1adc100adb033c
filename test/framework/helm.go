package framework

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// ChartsDir holds the Helm charts.
func ChartsDir() string { return filepath.Join(RepoRoot(), "deploy", "charts") }

// Helm is the helm binary that hack/helm.sh builds from the Go module proxy into
// ~/.cache/dbfleet/tools (the first build takes a few minutes; later calls reuse it). Its
// progress goes to stderr.
func Helm() (string, error) {
	helmOnce.Do(func() { helmPath, helmErr = buildHelm() })
	return helmPath, helmErr
}

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

func buildHelm() (string, error) {
	cmd := exec.Command(filepath.Join(RepoRoot(), "hack", "helm.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/helm.sh (builds helm from the Go module proxy): %w", err)
	}
	path := strings.TrimSpace(string(out))
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("hack/helm.sh printed %q: %w", path, err)
	}
	return path, nil
}

// RunHelm runs helm with args and returns its stdout; an error carries its stderr.
func RunHelm(args ...string) ([]byte, error) {
	helm, err := Helm()
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(helm, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// HelmTemplate renders the chart deploy/charts/<chart> as release <chart>, with extra helm
// template arguments (--set, -f), into objects.
func HelmTemplate(chart string, args ...string) ([]*unstructured.Unstructured, error) {
	out, err := RunHelm(append([]string{"template", chart, filepath.Join(ChartsDir(), chart)}, args...)...)
	if err != nil {
		return nil, err
	}
	return DecodeObjects(out)
}

// ObjectKey names an object by kind, namespace and name.
func ObjectKey(u *unstructured.Unstructured) string {
	return u.GetKind() + " " + strings.TrimPrefix(u.GetNamespace()+"/"+u.GetName(), "/")
}

var compareScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// normalize turns u into what its typed object serialises to (so "50m" and 0.05, 0440 and 288,
// absent and null compare equal) and takes out the metadata that install tools add to: labels
// and annotations of the object and of a pod template, returned apart.
func normalize(u *unstructured.Unstructured) (map[string]any, map[string]map[string]string, error) {
	gvk := u.GroupVersionKind()
	typed, err := compareScheme.New(gvk)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", ObjectKey(u), err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, typed, true); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", ObjectKey(u), err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", ObjectKey(u), err)
	}
	m["apiVersion"], m["kind"] = gvk.GroupVersion().String(), gvk.Kind
	delete(m, "status")
	meta := map[string]map[string]string{}
	take := func(prefix string, path ...string) {
		for _, f := range []string{"labels", "annotations"} {
			v, _, _ := unstructured.NestedStringMap(m, append(path, f)...)
			meta[prefix+f] = v
			unstructured.RemoveNestedField(m, append(path, f)...)
		}
		unstructured.RemoveNestedField(m, append(path, "creationTimestamp")...)
	}
	take("", "metadata")
	take("template.", "spec", "template", "metadata")
	if md, ok := m["metadata"].(map[string]any); ok && len(md) == 0 {
		delete(m, "metadata")
	}
	return m, meta, nil
}

// CompareObjects says how got differs from want, object by object (by kind, namespace and
// name): objects missing or extra, and every difference of their content, apart from labels and
// annotations, where got may carry more than want but must carry each of want's with its value.
// same, when given, compares the objects of one kind first and takes out what it checked (a
// Secret whose data only means the same, say): it returns the differences it found.
func CompareObjects(want, got []*unstructured.Unstructured, same map[string]func(want, got map[string]any) []string) []string {
	index := func(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
		m := map[string]*unstructured.Unstructured{}
		for _, o := range objs {
			m[ObjectKey(o)] = o
		}
		return m
	}
	w, g := index(want), index(got)
	var diffs []string
	var keys []string
	for k := range w {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		gu, ok := g[k]
		if !ok {
			diffs = append(diffs, "missing: "+k)
			continue
		}
		wm, wmeta, err := normalize(w[k])
		if err != nil {
			diffs = append(diffs, err.Error())
			continue
		}
		gm, gmeta, err := normalize(gu)
		if err != nil {
			diffs = append(diffs, err.Error())
			continue
		}
		for field, wv := range wmeta {
			for lk, lv := range wv {
				if gv, ok := gmeta[field][lk]; !ok || gv != lv {
					diffs = append(diffs, fmt.Sprintf("%s: %s %s=%q, want %q", k, field, lk, gv, lv))
				}
			}
		}
		if f := same[w[k].GetKind()]; f != nil {
			for _, d := range f(wm, gm) {
				diffs = append(diffs, k+": "+d)
			}
		}
		if !reflect.DeepEqual(wm, gm) {
			diffs = append(diffs, fmt.Sprintf("%s differs (-want +got):\n%s", k, cmp.Diff(wm, gm)))
		}
	}
	var extra []string
	for k := range g {
		if _, ok := w[k]; !ok {
			extra = append(extra, "extra: "+k)
		}
	}
	sort.Strings(extra)
	return append(diffs, extra...)
}
