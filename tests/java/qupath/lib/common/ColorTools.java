package qupath.lib.common;

/** Packed RGB colours (QuPath: qupath-core .../common/ColorTools.java). */
public final class ColorTools {
    private ColorTools() {
    }

    public static int packRGB(int r, int g, int b) {
        return (255 << 24) | ((r & 0xff) << 16) | ((g & 0xff) << 8) | (b & 0xff);
    }

    public static int red(int rgb) {
        return (rgb >> 16) & 0xff;
    }

    public static int green(int rgb) {
        return (rgb >> 8) & 0xff;
    }

    public static int blue(int rgb) {
        return rgb & 0xff;
    }
}
