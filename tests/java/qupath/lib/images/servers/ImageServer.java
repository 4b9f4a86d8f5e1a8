package qupath.lib.images.servers;

import java.net.URI;
import java.util.Collection;

/** The part of QuPath's ImageServer interface the bridge reads (qupath-core .../servers/ImageServer.java). */
public interface ImageServer<T> extends AutoCloseable {
    String getPath();

    Collection<URI> getURIs();

    int nResolutions();

    double getDownsampleForResolution(int level);

    int getWidth();

    int getHeight();

    PixelCalibration getPixelCalibration();

    ImageServerMetadata getMetadata();
}
