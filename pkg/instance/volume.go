package instance

import (
	"fmt"
	"syscall"

	"k8s.io/apimachinery/pkg/api/resource"
)

// volumeFullBelow is the free space under which the data volume counts as full: postgres needs
// a whole WAL segment (16 MiB) free to switch to the next one, and stops writing without it.
const volumeFullBelow = 16 << 20

// volumeSpace is the data volume's size and the space left on it for postgres.
type volumeSpace struct {
	free, size uint64
	err        error
}

func readVolumeSpace(path string) volumeSpace {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(path, &fs); err != nil {
		return volumeSpace{err: fmt.Errorf("statfs %s: %w", path, err)}
	}
	return volumeSpace{free: fs.Bavail * uint64(fs.Bsize), size: fs.Blocks * uint64(fs.Bsize)}
}

func (v volumeSpace) full() bool { return v.err == nil && v.size > 0 && v.free < volumeFullBelow }

// message says what a full volume means for the database and what to do.
func (v volumeSpace) message(path string) string {
	return fmt.Sprintf("the data volume %s has %s free of %s: postgres cannot write (WAL needs %s free); grow spec.storage.size (the agent expands the claims when their StorageClass allows it) or free space; nothing is deleted",
		path, bytesString(v.free), bytesString(v.size), bytesString(volumeFullBelow))
}

func bytesString(n uint64) string {
	return resource.NewQuantity(int64(n), resource.BinarySI).String()
}
