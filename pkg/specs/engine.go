package specs

import (
	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// engine describes what the agent needs to know of a known engine.
type engine struct {
	image   string
	port    int32
	dataDir string
}

var engines = map[dbfleetv1alpha1.Engine]engine{
	dbfleetv1alpha1.EnginePostgres: {image: "postgres", port: 5432, dataDir: "/var/lib/postgresql/data"},
	dbfleetv1alpha1.EngineMySQL:    {image: "mysql", port: 3306, dataDir: "/var/lib/mysql"},
	dbfleetv1alpha1.EngineCustom:   {port: 5432, dataDir: "/data"},
}

// Image is the container image of the database: spec.image, else the engine's image at version.
func Image(t *dbfleetv1alpha1.DatabaseTemplate) string {
	if t.Image != "" {
		return t.Image
	}
	return engines[t.Engine].image + ":" + t.Version
}

// DatabasePort is the port the engine's database listens on in its pods (the "db" port of the
// container and of the Services).
func DatabasePort(e dbfleetv1alpha1.Engine) int32 { return engines[e].port }
