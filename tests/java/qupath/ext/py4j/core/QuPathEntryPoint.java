package qupath.ext.py4j.core;

import java.io.IOException;
import java.util.Base64;

import medcopilot.fixture.Snapshots;
import qupath.lib.gui.scripting.QPEx;
import qupath.lib.gui.viewer.QuPathViewer;

/** The Py4J entry point of QuPath's Py4J extension (qupath-extension-py4j .../core/QuPathEntryPoint.java). */
public class QuPathEntryPoint extends QPEx {
    public static String getExtensionVersion() {
        return "fixture";
    }

    /** PNG bytes of what the viewer shows. */
    public static byte[] snapshot(QuPathViewer viewer) throws IOException {
        if (viewer == null) {
            throw new IOException("no viewer to snapshot");
        }
        return Snapshots.png(viewer);
    }

    public static String snapshotBase64(QuPathViewer viewer) throws IOException {
        return Base64.getEncoder().encodeToString(snapshot(viewer));
    }
}
