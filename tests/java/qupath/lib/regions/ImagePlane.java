package qupath.lib.regions;

/** A z-slice and time point of an image (QuPath: qupath-core .../regions/ImagePlane.java). */
public class ImagePlane {
    private static final ImagePlane DEFAULT = new ImagePlane(-1, 0, 0);

    private final int c;
    private final int z;
    private final int t;

    private ImagePlane(int c, int z, int t) {
        this.c = c;
        this.z = z;
        this.t = t;
    }

    public static ImagePlane getDefaultPlane() {
        return DEFAULT;
    }

    public int getC() {
        return c;
    }

    public int getZ() {
        return z;
    }

    public int getT() {
        return t;
    }
}
