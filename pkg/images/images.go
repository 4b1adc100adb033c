// Package images names the container images dbfleet installs, in one place. `hub join` takes
// its default agent image from here, and deploy/hub (kustomize) and the Helm charts under
// deploy/charts name the same references in their YAML, which TestInstallFilesNameTheseImages
// checks, so that none of them drifts from the others.
package images

const (
	// Registry is where the project's images are published.
	Registry = "ghcr.io/dbfleet"
	// HubRepository is the image of `hub run` (/hub).
	HubRepository = Registry + "/hub"
	// AgentRepository is the image of the agent (/agent) and of the PostgreSQL instance manager
	// (/dbfleet-instance), which the agent's database pods copy from it in an init container.
	AgentRepository = Registry + "/agent"
	// Tag is the tag the install files name unless told otherwise.
	Tag = "latest"

	// Hub and Agent are the references the install files name by default.
	Hub   = HubRepository + ":" + Tag
	Agent = AgentRepository + ":" + Tag

	// Source is the project's source repository, the images' org.opencontainers.image.source.
	Source = "https://github.com/dbfleet/dbfleet"
)

// The OCI annotation keys of the images' labels (image-spec annotations.md).
const (
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
	LabelSource   = "org.opencontainers.image.source"
	LabelTitle    = "org.opencontainers.image.title"
)

// NonRootUser is the numeric user and group the hub and agent images run as (the distroless
// "nonroot" uid); the install files' securityContexts name the same uid.
const (
	NonRootUID  = 65532
	NonRootUser = "65532:65532"
)
