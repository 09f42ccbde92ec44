// Package imagetest checks the container image that `make image` builds
// (scripts/image.sh) and runs llmdiag inside it.
//
// Its test builds the image with the same script (twice, to check that the
// archive is byte-for-byte reproducible), reads the OCI archive with
// ReadArchive (the image's config, labels and every file of its layers),
// then runs `llmdiag serve` inside the image with `buildah run --isolation
// chroot` on a free loopback port, with the simulator's seed fleet (started
// in the test binary, outside the image) mounted read-only as the fleet
// file, as a cluster mounts a ConfigMap. It checks that grpc.health.v1
// answers SERVING, that the fleet's nodes are listed, that the process runs
// as 65532, and that SIGTERM to its pid stops it cleanly. buildah keeps its
// state in the test's temporary directory (vfs driver), removed at the end.
//
// A missing buildah fails the test saying how to install it (make deps, or
// apt-get install -y buildah); only -short skips it.
package imagetest
