//go:build !race

package binfile

const raceBuild = false
