SET @punctual_0023 = (SELECT IF(table_type = 'VIEW', 'tasks', 'punctual_tasks') FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = 'punctual_tasks');--> statement-breakpoint
SET @punctual_0023_sql = IF(EXISTS (SELECT 1 FROM information_schema.STATISTICS WHERE table_schema = DATABASE() AND table_name = @punctual_0023 AND index_name = 'tasks_type_status'), CONCAT('ALTER TABLE `', @punctual_0023, '` DROP INDEX `tasks_type_status`'), 'DO 0');--> statement-breakpoint
PREPARE punctual_0023 FROM @punctual_0023_sql;--> statement-breakpoint
EXECUTE punctual_0023;--> statement-breakpoint
DEALLOCATE PREPARE punctual_0023;
