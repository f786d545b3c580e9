/* Unit tests for core/crypto's SHA-256 (API keys are found by the hash of
 * the presented key; checksums of uploads and files): the FIPS 180-2
 * vectors, from memory and from a file, from several threads at once (the
 * method is fetched once, on the first call of any thread). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/crypto.h"

static const struct {
    const char *name, *in, *hex;
} vectors[] = {
    {"the empty message", "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
    {"one block: abc", "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
    {"two blocks: 448 bits", "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
     "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
};

static void *hash_all(void *arg)
{
    int *bad = arg;
    for (int round = 0; round < 200; round++)
        for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
            char hex[CRYPTO_SHA256_HEX];
            crypto_sha256_hex(vectors[i].in, strlen(vectors[i].in), hex);
            *bad |= strcmp(hex, vectors[i].hex) != 0;
        }
    return NULL;
}

static void sha256_of_memory_from_several_threads(void **state)
{
    (void)state;
    pthread_t t[4];
    int bad[4] = {0};
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, hash_all, &bad[i]), 0);
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(bad[i], 0);
    }
    for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
        char hex[CRYPTO_SHA256_HEX];
        crypto_sha256_hex(vectors[i].in, strlen(vectors[i].in), hex);
        if (strcmp(hex, vectors[i].hex) != 0)
            fail_msg("%s: %s", vectors[i].name, hex);
    }
}

static void sha256_of_a_file(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
        FILE *f = tmpfile();
        assert_non_null(f);
        size_t n = strlen(vectors[i].in);
        assert_int_equal(fwrite(vectors[i].in, 1, n, f), n);
        assert_int_equal(fflush(f), 0);
        assert_int_equal(lseek(fileno(f), 0, SEEK_SET), 0);
        char hex[CRYPTO_SHA256_HEX];
        assert_int_equal(crypto_sha256_fd_hex(fileno(f), hex), 0);
        fclose(f);
        if (strcmp(hex, vectors[i].hex) != 0)
            fail_msg("%s: %s", vectors[i].name, hex);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sha256_of_memory_from_several_threads),
        cmocka_unit_test(sha256_of_a_file),
    };
    return cmocka_run_group_tests_name("core/crypto", tests, NULL, NULL);
}
