// Compiles cmake/precompiled.hpp into the precompiled header every meith target reuses.
