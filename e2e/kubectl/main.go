// Command kubectl is the real kubectl at the same release as the apiserver (the test's admin
// client, so the run needs no kubectl of the machine's and no version skew); upstream's
// cmd/kubectl/kubectl.go without the cloud auth plugins, which a bearer token does not need.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	logs.GlogSetter(cmd.GetLogVerbosity(os.Args)) // nolint:errcheck
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		util.CheckErr(err)
	}
}
