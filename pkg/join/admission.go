package join

import (
	"bufio"
	"bytes"
	_ "embed"
	"fmt"
	"maps"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// agentAdmission is the ValidatingAdmissionPolicy, and its binding, that keeps the agent's writes
// in its member to dbfleet's own objects in database namespaces; the agent chart renders the same
// file (its files/agent-admission.yaml links here).
//
//go:embed agent-admission.yaml
var agentAdmission []byte

// AgentAdmissionPolicy is the agent's admission policy and its binding, labelled as the agent's
// other member objects are.
func AgentAdmissionPolicy(labels map[string]string) []client.Object {
	objs := []client.Object{&admissionregistrationv1.ValidatingAdmissionPolicy{}, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(agentAdmission)))
	for _, obj := range objs {
		doc, err := reader.Read()
		if err == nil {
			err = yaml.UnmarshalStrict(doc, obj)
		}
		if err != nil {
			// Embedded and read by every test of this package: it cannot fail at run time.
			panic(fmt.Sprintf("pkg/join/agent-admission.yaml: %v", err))
		}
		obj.SetLabels(maps.Clone(labels))
	}
	return objs
}
