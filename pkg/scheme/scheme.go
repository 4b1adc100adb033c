// Package scheme builds the runtime.Scheme every dbfleet process uses: the built-in Kubernetes
// kinds and dbfleet.io/v1alpha1.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// New returns a scheme with the built-in kinds and dbfleet's.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(dbfleetv1alpha1.AddToScheme(s))
	return s
}
