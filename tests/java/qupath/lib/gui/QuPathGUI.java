package qupath.lib.gui;

import java.awt.image.BufferedImage;
import java.io.IOException;

import medcopilot.fixture.TiffImageServer;
import qupath.fx.utils.FXUtils;
import qupath.lib.gui.viewer.QuPathViewer;
import qupath.lib.images.ImageData;

/** QuPath's main window with one viewer (qupath-gui-fx .../gui/QuPathGUI.java). */
public class QuPathGUI {
    private static QuPathGUI instance;
    private final QuPathViewer viewer;

    private QuPathGUI(double width, double height) {
        this.viewer = new QuPathViewer(width, height);
    }

    /** Fixture only: the single instance with a viewer component of the given size. */
    public static synchronized QuPathGUI createInstance(double width, double height) {
        instance = new QuPathGUI(width, height);
        return instance;
    }

    public static QuPathGUI getInstance() {
        return instance;
    }

    public QuPathViewer getViewer() {
        return viewer;
    }

    public boolean openImage(QuPathViewer viewer, String pathNew) throws IOException {
        return openImage(viewer, pathNew, false, false);
    }

    /** Opens an image in a viewer; like QuPath, only on the JavaFX application thread. */
    public boolean openImage(QuPathViewer viewer, String pathNew, boolean prompt, boolean includeURLs)
            throws IOException {
        if (!FXUtils.isFxApplicationThread()) {
            throw new IllegalStateException("openImage must be called on the JavaFX application thread");
        }
        if (viewer == null || pathNew == null) {
            return false;
        }
        viewer.setImageData(new ImageData<BufferedImage>(new TiffImageServer(pathNew)));
        return true;
    }
}
