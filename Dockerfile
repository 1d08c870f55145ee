# The statefs image: one binary that is both the FUSE daemon (statefs mount)
# and the CSI node plugin (statefs csi); deploy/kubernetes/ runs it as both.
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t statefs:$(git describe --tags --always --dirty) .
#
# The build stage runs `make build`, the build the test suite (make test, CI)
# builds and mounts; deploy/kubernetes/manifests_test.go checks that this
# stage's Go matches go.mod's.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN VERSION=${VERSION} make build

# The runtime is the binary on Debian slim (the same Debian, so the same glibc,
# as the build stage). It needs no fuse3: the daemon mounts /dev/fuse with the
# mount(2) system call itself (go-fuse's DirectMountStrict, never fusermount),
# and the CSI plugin binds volumes with mount(2) too, so neither runs mount(8).
# statefs mount also detaches, with umount(2), the dead FUSE mount a killed
# daemon left behind. Both processes run as root, in a privileged container:
# mounting needs CAP_SYS_ADMIN.
FROM debian:bookworm-slim
COPY --from=build /src/bin/statefs /usr/local/bin/statefs
ENTRYPOINT ["statefs"]
