package images_test

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/dbfleet/dbfleet/pkg/images"
	"github.com/dbfleet/dbfleet/pkg/join"
)

func repoFile(t *testing.T, rel string) map[string]any {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(self), "..", "..", rel))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	return m
}

// TestInstallFilesNameTheseImages: the references of this package are the ones every install
// names: hub join's default agent image, deploy/hub's Deployment (kustomize), and both charts'
// default values and appVersion, so that changing one place without the others fails here.
func TestInstallFilesNameTheseImages(t *testing.T) {
	if join.DefaultAgentImage != images.Agent {
		t.Errorf("hub join's default agent image is %s, want %s", join.DefaultAgentImage, images.Agent)
	}
	deploy := repoFile(t, "deploy/hub/deployment.yaml")
	containers, _, _ := unstructured.NestedSlice(deploy, "spec", "template", "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("deploy/hub/deployment.yaml has %d containers, want 1", len(containers))
	}
	if got := containers[0].(map[string]any)["image"]; got != images.Hub {
		t.Errorf("deploy/hub/deployment.yaml runs %v, want %s", got, images.Hub)
	}
	for chart, repo := range map[string]string{"dbfleet-hub": images.HubRepository, "dbfleet-agent": images.AgentRepository} {
		values := repoFile(t, filepath.Join("deploy/charts", chart, "values.yaml"))
		if got, _, _ := unstructured.NestedString(values, "image", "repository"); got != repo {
			t.Errorf("%s values image.repository is %q, want %s", chart, got, repo)
		}
		if got, _, _ := unstructured.NestedString(values, "image", "tag"); got != images.Tag {
			t.Errorf("%s values image.tag is %q, want %s", chart, got, images.Tag)
		}
		if got := repoFile(t, filepath.Join("deploy/charts", chart, "Chart.yaml"))["appVersion"]; got != images.Tag {
			t.Errorf("%s Chart.yaml appVersion is %v, want %s", chart, got, images.Tag)
		}
	}
}
