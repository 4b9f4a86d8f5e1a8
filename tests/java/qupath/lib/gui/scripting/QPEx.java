package qupath.lib.gui.scripting;

import qupath.lib.gui.QuPathGUI;
import qupath.lib.gui.viewer.QuPathViewer;

/** QuPath's scripting helpers that the Py4J entry point inherits (qupath-gui-fx .../scripting/QPEx.java). */
public class QPEx {
    public static QuPathGUI getQuPath() {
        return QuPathGUI.getInstance();
    }

    public static QuPathViewer getCurrentViewer() {
        QuPathGUI qupath = getQuPath();
        return qupath == null ? null : qupath.getViewer();
    }
}
